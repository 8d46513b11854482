// Holds, tries and waits for PostgreSQL or Redis locks with the .NET DistributedLock library,
// as the test on the other end of stdin tells it, one command a line; answers one line each.
//
//   DlockInterop postgres CONNECTION_STRING
//   DlockInterop redis HOST:PORT[,HOST:PORT...]     (more than one: RedLock over them all)
//
//   hold KIND NAME          acquire (30 s at most)          -> "held" | "timeout"
//   try KIND NAME           one attempt                     -> "held" | "taken"
//   wait KIND NAME MS       acquire within MS milliseconds  -> "held MS_WAITED" | "timeout"
//   release KIND NAME       release what it holds           -> "released"
//   key NAME                the advisory key NAME maps to   -> PostgresAdvisoryLockKey's text
//
// KIND on PostgreSQL: lock (session-level), xact (transaction-scoped, on a transaction of its
// own), read and write (PostgresDistributedReaderWriterLock). Names map as with
// allowHashing: true.
// KIND on Redis: lock (RedisDistributedLock), read and write (RedisDistributedReaderWriterLock),
// sem:N (RedisDistributedSemaphore of max count N, on the first server, as .NET takes one).
using System.Diagnostics;
using Medallion.Threading.Postgres;
using Medallion.Threading.Redis;
using Npgsql;
using StackExchange.Redis;

if (args.Length != 2 || (args[0] != "postgres" && args[0] != "redis"))
{
    Console.Error.WriteLine("usage: DlockInterop postgres CONNECTION_STRING | redis HOST:PORT[,...]  (commands on stdin)");
    return 2;
}
var connectionString = args[1];
var redis = args[0] == "redis"
    ? connectionString.Split(',').Select(e => ConnectionMultiplexer.Connect(e).GetDatabase()).ToArray()
    : [];
var held = new Dictionary<string, IDisposable>();

string? line;
while ((line = Console.ReadLine()) != null)
{
    var words = line.Split(' ', StringSplitOptions.RemoveEmptyEntries);
    if (words.Length == 0) continue;
    try
    {
        Console.WriteLine(Run(words));
    }
    catch (Exception e)
    {
        Console.WriteLine("error " + e.GetType().Name + ": " + e.Message.Replace('\n', ' '));
    }
}
foreach (var handle in held.Values) handle.Dispose();
return 0;

string Run(string[] words)
{
    if (words[0] == "key") return new PostgresAdvisoryLockKey(words[1], allowHashing: true).ToString();
    var (kind, name) = (words[1], words[2]);
    var slot = kind + " " + name;
    switch (words[0])
    {
        case "hold":
            return Take(kind, name, TimeSpan.FromSeconds(30)) is { } h ? Keep(slot, h, "held") : "timeout";
        case "try":
            return Take(kind, name, TimeSpan.Zero) is { } t ? Keep(slot, t, "held") : "taken";
        case "wait":
            var clock = Stopwatch.StartNew();
            return Take(kind, name, TimeSpan.FromMilliseconds(int.Parse(words[3]))) is { } w
                ? Keep(slot, w, "held " + clock.ElapsedMilliseconds)
                : "timeout";
        case "release":
            held[slot].Dispose();
            held.Remove(slot);
            return "released";
        default:
            return "error unknown command " + words[0];
    }
}

string Keep(string slot, IDisposable handle, string answer)
{
    held[slot] = handle;
    return answer;
}

IDisposable? Take(string kind, string name, TimeSpan timeout) =>
    redis.Length > 0 ? TakeRedis(kind, name, timeout) : TakePostgres(kind, name, timeout);

IDisposable? TakeRedis(string kind, string name, TimeSpan timeout)
{
    if (kind.StartsWith("sem:"))
    {
        return new RedisDistributedSemaphore(name, int.Parse(kind[4..]), redis[0]).TryAcquire(timeout);
    }
    return kind switch
    {
        "lock" => new RedisDistributedLock(name, redis).TryAcquire(timeout),
        "read" => new RedisDistributedReaderWriterLock(name, redis).TryAcquireReadLock(timeout),
        "write" => new RedisDistributedReaderWriterLock(name, redis).TryAcquireWriteLock(timeout),
        _ => throw new ArgumentException("unknown kind " + kind),
    };
}

IDisposable? TakePostgres(string kind, string name, TimeSpan timeout)
{
    var key = new PostgresAdvisoryLockKey(name, allowHashing: true);
    switch (kind)
    {
        case "lock":
            return new PostgresDistributedLock(key, connectionString).TryAcquire(timeout);
        case "read":
            return new PostgresDistributedReaderWriterLock(key, connectionString).TryAcquireReadLock(timeout);
        case "write":
            return new PostgresDistributedReaderWriterLock(key, connectionString).TryAcquireWriteLock(timeout);
        case "xact":
            var connection = new NpgsqlConnection(connectionString);
            connection.Open();
            var transaction = connection.BeginTransaction();
            if (PostgresDistributedLock.TryAcquireWithTransaction(key, transaction, timeout))
            {
                return new TransactionScope(connection, transaction);
            }
            transaction.Dispose();
            connection.Dispose();
            return null;
        default:
            throw new ArgumentException("unknown kind " + kind);
    }
}

// A transaction-scoped lock ends with its transaction.
sealed class TransactionScope(NpgsqlConnection connection, NpgsqlTransaction transaction) : IDisposable
{
    public void Dispose()
    {
        transaction.Rollback();
        transaction.Dispose();
        connection.Dispose();
    }
}
