public import Foundation
import Synchronization
public import TGBase

/// A wall clock a test moves by hand: what TokenGate decides by the time (expiry, lifetimes,
/// rate windows) is tested without sleeping. TokenGate's side only; the fake provider keeps its own.
public final class ManualClock: Sendable {
    private let current: Mutex<Date>

    public init(_ start: Date = Date()) { current = Mutex(start) }

    public var now: Date { current.withLock { $0 } }

    public func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }

    /// The clock as TokenGate takes it.
    public var wallClock: WallClock { WallClock { [self] in now } }
}
