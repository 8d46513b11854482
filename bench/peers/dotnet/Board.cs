using System.IO.MemoryMappedFiles;

/// Shared memory between this program's processes: 64-bit slots of a memory-mapped file, as
/// py_lock_bench.py's boards are shared memory of its forked processes. .NET cannot fork, so the
/// children are started afresh and open the file by its path. Every access is Volatile or
/// Interlocked: the slots are the only channel between the processes.
sealed unsafe class Board : IDisposable
{
    readonly MemoryMappedFile file;
    readonly MemoryMappedViewAccessor view;
    readonly long* slots;
    readonly bool owner;

    public string Path { get; }

    Board(string path, long slotCount, bool create)
    {
        Path = path;
        owner = create;
        // A new file is zero-filled to its capacity; an opened one is mapped whole.
        file = MemoryMappedFile.CreateFromFile(path, create ? FileMode.CreateNew : FileMode.Open, null,
            create ? slotCount * sizeof(long) : 0);
        view = file.CreateViewAccessor();
        byte* start = null;
        view.SafeMemoryMappedViewHandle.AcquirePointer(ref start);
        slots = (long*)(start + view.PointerOffset);
    }

    /// A board of `slotCount` zeros in a file of the temporary directory, removed on Dispose.
    public static Board Create(string kind, long slotCount) =>
        new(System.IO.Path.Combine(System.IO.Path.GetTempPath(),
            $"dlock-dotnet-peer-{Environment.ProcessId}-{kind}.board"), slotCount, create: true);

    /// The board a parent process created at `path`.
    public static Board Open(string path) => new(path, 0, create: false);

    public long Read(long slot) => Volatile.Read(ref slots[slot]);

    public void Write(long slot, long value) => Volatile.Write(ref slots[slot], value);

    /// Adds `delta` and returns the new value.
    public long Add(long slot, long delta) => Interlocked.Add(ref slots[slot], delta);

    /// Sets `slot` to `value` if it is still `expected`.
    public void SetIf(long slot, long expected, long value) =>
        Interlocked.CompareExchange(ref slots[slot], value, expected);

    public void Dispose()
    {
        view.SafeMemoryMappedViewHandle.ReleasePointer();
        view.Dispose();
        file.Dispose();
        if (owner) File.Delete(Path);
    }
}
