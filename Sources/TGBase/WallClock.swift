public import Foundation

/// Wall-clock time, injected wherever expiry, lifetimes and rate windows are decided, so tests
/// move time by hand instead of sleeping. (The event loops' timers use the monotonic clock,
/// `EventLoop.now()`; nothing stored or compared with a database row does.)
public struct WallClock: Sendable {
    public var now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    public static let system = WallClock { Date() }
}
