// The workload of bench/peer_bench.cpp on .NET's DistributedLock, for bench/peers.sh.
//
//   DlockPeerBench redis HOST:PORT PREFIX [--iterations N] [--handoffs N] [--contenders P]
//                  [--seconds S] [--settle-us U] [--uncontended-only | --contended-only]
//   DlockPeerBench postgres CONNECTION_STRING BASE [...]
//
// redis: RedisDistributedLock on the key PREFIX + name, one ConnectionMultiplexer per process.
//   A blocked Acquire() polls, sleeping 10 to 800 ms at random between tries (the library's
//   default BusyWaitSleepTime, which a user who writes `lock.Acquire()` gets).
// postgres: PostgresDistributedLock on the name BASE + name (allowHashing: true, so the key dlock
//   would take for that name), with the library's defaults (multiplexing on) over Npgsql's
//   connection pool (on by default: the connection string says nothing about it). A blocked
//   Acquire() waits in pg_advisory_lock, so the server wakes it.
//
// Prints the "key value" lines of dlock-peer-bench: uncontended_us, handoff_us,
// contended_per_s, contended_fewest, contended_most, and version (the DistributedLock package's)
// and runtime (.NET's). --uncontended-only prints the first alone, --contended-only the
// contention's. The handoff's two sides and the P contenders are processes this program starts
// (itself, with a hidden --role), each with a client of its own made after it starts; they meet
// on a Board, as py_lock_bench.py's processes do. A contender makes one acquire + release before
// the common start, so that the JIT compiling the library (a cost a running service has paid
// long before) is not counted in its grants; the uncontended run warms up as dlock's does.
using System.Diagnostics;
using System.Globalization;
using System.Reflection;
using Medallion.Threading;
using Medallion.Threading.Postgres;
using Medallion.Threading.Redis;
using StackExchange.Redis;

try
{
    var options = Options.Parse(args);
    if (options is null)
    {
        Console.Error.WriteLine("usage: DlockPeerBench redis HOST:PORT PREFIX | postgres CONNECTION_STRING BASE"
            + " [--iterations N] [--handoffs N] [--contenders P] [--seconds S] [--settle-us U]"
            + " [--uncontended-only | --contended-only]");
        return 64;
    }
    if (options.Role is { } role)
    {
        using var board = Board.Open(options.BoardPath!);
        if (role == "handoff") Workload.TakeTurns(options, board, options.Me);
        else Workload.Contend(options, board, options.Me);
        return 0;
    }
    var print = (string key, double value, string format) =>
        Console.WriteLine(key + " " + value.ToString(format, CultureInfo.InvariantCulture));
    if (options.UncontendedOnly)
    {
        print("uncontended_us", Workload.Uncontended(options), "F2");
        return 0;
    }
    double? handoff = options.ContendedOnly ? null : Workload.Handoff(options, args);
    var grants = Workload.Contention(options, args);
    if (handoff is { } handed)
    {
        print("uncontended_us", Workload.Uncontended(options), "F2");
        print("handoff_us", handed, "F2");
    }
    print("contended_per_s", grants.Sum() / options.Seconds, "F0");
    print("contended_fewest", grants.Min(), "F0");
    print("contended_most", grants.Max(), "F0");
    if (handoff is not null)
    {
        var assembly = options.Library == "redis" ? typeof(RedisDistributedLock).Assembly
                                                  : typeof(PostgresDistributedLock).Assembly;
        var version = assembly.GetCustomAttribute<AssemblyInformationalVersionAttribute>()?.InformationalVersion;
        Console.WriteLine("version " + (version ?? "?").Split('+')[0]);
        Console.WriteLine("runtime " + Environment.Version);
    }
    return 0;
}
catch (Exception e)
{
    Console.Error.WriteLine("DlockPeerBench: " + e.Message);
    return 1;
}

sealed record Options(string Library, string Endpoint, string Base)
{
    public int Iterations { get; private set; } = 2000;
    public int Handoffs { get; private set; } = 500;
    public int Contenders { get; private set; } = 8;
    public double Seconds { get; private set; } = 5;
    public int SettleUs { get; private set; } = 3000;
    public bool UncontendedOnly { get; private set; }
    public bool ContendedOnly { get; private set; }
    // Set on the processes this program starts: "handoff" or "contend", which one, and where
    // their board is.
    public string? Role { get; private set; }
    public int Me { get; private set; }
    public string? BoardPath { get; private set; }

    /// The options of `args`, or null when they are not this program's.
    public static Options? Parse(string[] args)
    {
        if (args.Length < 3 || (args[0] != "redis" && args[0] != "postgres")) return null;
        var options = new Options(args[0], args[1], args[2]);
        for (var i = 3; i < args.Length; ++i)
        {
            var value = i + 1 < args.Length ? args[i + 1] : null;
            switch (args[i])
            {
                case "--uncontended-only": options.UncontendedOnly = true; continue;
                case "--contended-only": options.ContendedOnly = true; continue;
            }
            if (value is null) return null;
            switch (args[i])
            {
                case "--iterations": options.Iterations = int.Parse(value); break;
                case "--handoffs": options.Handoffs = int.Parse(value); break;
                case "--contenders": options.Contenders = int.Parse(value); break;
                case "--seconds": options.Seconds = double.Parse(value, CultureInfo.InvariantCulture); break;
                case "--settle-us": options.SettleUs = int.Parse(value); break;
                case "--role" when i + 3 < args.Length:
                    (options.Role, options.Me, options.BoardPath) = (value, int.Parse(args[i + 2]), args[i + 3]);
                    i += 2;
                    break;
                default: return null;
            }
            ++i;
        }
        var valid = options.Iterations >= 1 && options.Handoffs >= 1 && options.Contenders >= 1
            && options.Seconds > 0 && options.SettleUs >= 0 && !(options.UncontendedOnly && options.ContendedOnly);
        return valid ? options : null;
    }
}

/// One process's client of the library, made where it is used.
sealed class Peer : IDisposable
{
    readonly Options options;
    readonly ConnectionMultiplexer? redis;

    public Peer(Options options)
    {
        this.options = options;
        if (options.Library == "redis") redis = ConnectionMultiplexer.Connect(options.Endpoint);
    }

    public IDistributedLock Lock(string name) => redis is { } connection
        ? new RedisDistributedLock(options.Base + name, connection.GetDatabase())
        : new PostgresDistributedLock(new PostgresAdvisoryLockKey(options.Base + name, allowHashing: true),
            options.Endpoint);

    public void Dispose() => redis?.Dispose();
}

static class Workload
{
    // The handoff board's slots, as py_lock_bench.py's HandoffBoard; Samples holds nanoseconds.
    const int ReleaseStarted = 0, LastHolder = 1, Waiting = 2, Finished = 4, Count = 6, Samples = 7;
    // The contention board's.
    const int Ready = 0, StopAt = 1, Grants = 2;

    public static long NowNs() => (long)(Stopwatch.GetTimestamp() * (1e9 / Stopwatch.Frequency));

    static double Median(List<double> samples)
    {
        if (samples.Count == 0) return double.NaN;
        samples.Sort();
        return samples[samples.Count / 2];  // bench_support.cpp's summarize takes this one
    }

    /// The median acquire + release of one lock in microseconds, after a tenth as many to warm up.
    public static double Uncontended(Options options)
    {
        using var peer = new Peer(options);
        var @lock = peer.Lock("peer-uncontended");
        var samples = new List<double>(options.Iterations);
        for (var i = -Math.Max(1, options.Iterations / 10); i < options.Iterations; ++i)
        {
            var start = NowNs();
            @lock.Acquire().Dispose();
            if (i >= 0) samples.Add((NowNs() - start) / 1000.0);
        }
        return Median(samples);
    }

    /// One side of the handoff: bench_support.cpp's take_turns. Its waits for its turn sleep
    /// rather than spin, as there, so that they take no core from the peer's wake-up (whole
    /// milliseconds: .NET sleeps no shorter; none of them is inside a sample).
    public static void TakeTurns(Options options, Board board, int me)
    {
        using var peer = new Peer(options);
        var @lock = peer.Lock("peer-handoff");
        // Finished even on a failure, so that the peer does not wait for it forever.
        try
        {
            TakeTurns(options, board, me, @lock);
        }
        finally
        {
            board.Write(Finished + me, 1);
        }
    }

    static void TakeTurns(Options options, Board board, int me, IDistributedLock @lock)
    {
        var other = 1 - me;
        for (var i = 0; i < options.Handoffs; ++i)
        {
            while (i > 0 && board.Read(LastHolder) == me && board.Read(Finished + other) == 0) Thread.Sleep(1);
            board.Write(Waiting + me, 1);
            var held = @lock.Acquire();
            var acquired = NowNs();
            board.Write(Waiting + me, 0);
            if (board.Read(LastHolder) == other)
            {
                board.Write(Samples + board.Add(Count, 1) - 1, acquired - board.Read(ReleaseStarted));
            }
            board.Write(LastHolder, me);
            // Hand over only to a peer that is waiting and has had time to block.
            while (board.Read(Waiting + other) == 0 && board.Read(Finished + other) == 0) Thread.Sleep(1);
            Thread.Sleep(TimeSpan.FromMicroseconds(options.SettleUs));
            board.Write(ReleaseStarted, NowNs());
            held.Dispose();
        }
    }

    /// The median handoff in microseconds, from two processes taking turns.
    public static double Handoff(Options options, string[] args)
    {
        using var board = Board.Create("handoff", Samples + 2L * options.Handoffs);
        board.Write(LastHolder, -1);
        var sides = new[] { Start(args, "handoff", 0, board), Start(args, "handoff", 1, board) };
        foreach (var side in sides) side.WaitForExit();
        if (sides.Any(side => side.ExitCode != 0)) throw new Exception("a handoff process failed");
        var count = board.Read(Count);
        var samples = new List<double>();
        for (var i = 0; i < count; ++i) samples.Add(board.Read(Samples + i) / 1000.0);
        return Median(samples);
    }

    /// One contender: acquire and release from the common start to the common end.
    public static void Contend(Options options, Board board, int me)
    {
        try
        {
            using var peer = new Peer(options);
            var @lock = peer.Lock("peer-contended");
            @lock.Acquire().Dispose();
            board.Add(Ready, 1);
            while (board.Read(StopAt) == 0) Thread.Sleep(1);
            long mine = 0;
            while (NowNs() < board.Read(StopAt))
            {
                @lock.Acquire().Dispose();
                ++mine;
            }
            board.Write(Grants + me, mine);
        }
        catch
        {
            // Counted, and the end set, so that the others neither wait for it nor go on.
            board.Add(Ready, 1);
            board.Write(StopAt, 1);
            throw;
        }
    }

    /// The grants of each of P contending processes in the configured seconds.
    public static long[] Contention(Options options, string[] args)
    {
        using var board = Board.Create("contention", Grants + options.Contenders);
        var contenders = Enumerable.Range(0, options.Contenders).Select(me => Start(args, "contend", me, board)).ToList();
        var deadline = Stopwatch.StartNew();
        while (board.Read(Ready) < options.Contenders)
        {
            if (deadline.Elapsed > TimeSpan.FromSeconds(60) || contenders.Any(c => c.HasExited && c.ExitCode != 0))
            {
                foreach (var contender in contenders) contender.Kill();
                throw new Exception("a contender did not start");
            }
            Thread.Sleep(10);
        }
        // A contender that failed has set the end already: then the others stop at once.
        board.SetIf(StopAt, 0, NowNs() + (long)(options.Seconds * 1e9));
        foreach (var contender in contenders) contender.WaitForExit();
        if (contenders.Any(c => c.ExitCode != 0)) throw new Exception("a contender failed");
        return Enumerable.Range(0, options.Contenders).Select(me => board.Read(Grants + me)).ToArray();
    }

    /// Starts this program again with the same arguments, in `role` number `me` on `board`.
    static Process Start(string[] args, string role, int me, Board board)
    {
        var start = new ProcessStartInfo(Environment.ProcessPath!) { UseShellExecute = false };
        // Run as `dotnet DlockPeerBench.dll`, the program is the .dll, not the host.
        if (System.IO.Path.GetFileNameWithoutExtension(start.FileName) == "dotnet")
        {
            start.ArgumentList.Add(Assembly.GetEntryAssembly()!.Location);
        }
        foreach (var arg in args) start.ArgumentList.Add(arg);
        foreach (var arg in new[] { "--role", role, me.ToString(CultureInfo.InvariantCulture), board.Path })
        {
            start.ArgumentList.Add(arg);
        }
        return Process.Start(start)!;
    }
}
