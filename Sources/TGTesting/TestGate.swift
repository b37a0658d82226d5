import Synchronization

/// A gate a test opens: what waits on it (a fake provider's answer held with
/// ``FakeIdentityProvider/TokenMisbehaviour/held(_:)``, a test server's handler that goes quiet)
/// goes on once it is open. Instead of a delay long enough for the test to look at what happens
/// meanwhile, the test says when.
public final class TestGate: Sendable {
    private struct State {
        var open = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Lets every waiter, present and future, go on.
    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the gate is open.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let goOn = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if goOn { continuation.resume() }
        }
    }
}
