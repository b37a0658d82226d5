import Synchronization

/// Runs at most one task per key at a time in this process: a caller asking for a key already
/// in flight awaits that task's result instead of starting another. The task is not a child of
/// any caller, so a caller that gives up (client gone, deadline) does not cancel the work the
/// others wait for, nor leave it half done. Used for upstream refreshes, discovery documents and
/// key sets.
public final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let flights = Mutex<[Key: (id: UInt64, task: Task<Value, any Error>)]>([:])
    private let nextID = Atomic<UInt64>(0)

    public init() {}

    /// `joined` is called when the key was already in flight (the caller waits for that task).
    public func run(
        _ key: Key,
        joined: () -> Void = {},
        work: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let (task, isJoin) = flight(key, work)
        if isJoin { joined() }
        return try await task.value
    }

    /// Starts `work` for `key` unless a flight for it is under way, and returns at once (a
    /// refresh ahead of need). Callers that ask for the key meanwhile join it.
    public func start(_ key: Key, work: @escaping @Sendable () async throws -> Value) {
        _ = flight(key, work)
    }

    /// Whether a flight for `key` is under way.
    public func isRunning(_ key: Key) -> Bool {
        flights.withLock { $0[key] != nil }
    }

    /// Flights under way (a flight stays until its work has returned: after what it stored, the
    /// caller that joins it meanwhile hears its outcome).
    public var count: Int { flights.withLock { $0.count } }

    /// The task in flight for `key`, started now if there was none; whether it was there.
    private func flight(_ key: Key, _ work: @escaping @Sendable () async throws -> Value) -> (Task<Value, any Error>, Bool) {
        flights.withLock { flights -> (Task<Value, any Error>, Bool) in
            if let existing = flights[key] { return (existing.task, true) }
            let id = nextID.add(1, ordering: .relaxed).newValue
            // The task removes itself; it waits for this lock, so it is registered before that.
            let task = Task<Value, any Error> {
                defer { self.flights.withLock { if $0[key]?.id == id { $0[key] = nil } } }
                return try await work()
            }
            flights[key] = (id, task)
            return (task, false)
        }
    }
}
