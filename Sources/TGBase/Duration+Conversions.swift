public import Foundation

extension Duration {
    /// The duration in seconds, with its fraction.
    public var timeInterval: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded down.
    public var wholeMilliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// Whole seconds, rounded down.
    public var wholeSeconds: Int64 { components.seconds }
}
