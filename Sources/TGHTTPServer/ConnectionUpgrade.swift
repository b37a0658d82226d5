import CMicroHTTPD
import CMicroHTTPDShims
import TGBase
public import TGEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// What takes a connection over once it is answered `101 Switching Protocols`
/// (``ServerResponse/Body/upgrade(_:)``). Exactly one of its two methods is called, on the
/// connection's loop.
public protocol ConnectionUpgradeHandler: AnyObject, Sendable {
    /// The 101 went out: the connection is the handler's from now on, until it calls
    /// ``UpgradedConnection/close()``.
    func upgraded(_ connection: UpgradedConnection)
    /// The 101 was never sent (the client went away first, the answer was dropped for a
    /// deadline's, the server stopped): whatever was held for the connection is let go.
    func abandoned()
}

/// A connection that left HTTP: its socket, read and written by its handler on its loop
/// without blocking, until the handler closes it (once; never with `close(2)`, which is the
/// server's). The server stopping closes a connection still open, and says so first
/// (``onServerStop``).
public final class UpgradedConnection: @unchecked Sendable {
    // Invariant: used only on `loop` (libmicrohttpd calls the upgrade handler there, and the
    // handler's relay and the daemon's stop run there).
    /// The client's socket, non-blocking.
    public let socket: Int32
    public let loop: EventLoop
    /// Bytes the client sent after its request head that the server had read already: they
    /// come before anything read from ``socket``.
    public let early: [UInt8]
    /// Called once when the server stops with the connection still open, before it closes it.
    public var onServerStop: (() -> Void)?
    private var handle: OpaquePointer?
    private unowned(unsafe) let daemon: LoopDaemon

    init(socket: Int32, early: [UInt8], handle: OpaquePointer, daemon: LoopDaemon) {
        self.socket = socket
        self.early = early
        self.handle = handle
        self.daemon = daemon
        loop = daemon.loop
        let flags = fcntl(socket, F_GETFL)
        if flags >= 0, flags & O_NONBLOCK == 0 { _ = fcntl(socket, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Hands the connection back to the server to close (its request completes then). Once;
    /// later calls do nothing.
    public func close() {
        guard let handle else { return }
        self.handle = nil
        onServerStop = nil
        daemon.upgradedClosed(self)
        _ = CShims_MHD_upgrade_close(handle)
        daemon.runSoon()
    }

    /// The server stops: the handler hears it, then the connection is closed.
    func serverStops() {
        let stop = onServerStop
        onServerStop = nil
        stop?()
        close()
    }
}

/// libmicrohttpd sent a 101: the handler queued with it takes the connection.
let upgradeCallback:
    @convention(c) (
        UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutableRawPointer?, UnsafePointer<CChar>?, Int, Int32, OpaquePointer?
    ) -> Void = { daemonPointer, _, requestContext, extraIn, extraInSize, socket, handle in
        let daemon = Unmanaged<LoopDaemon>.fromOpaque(daemonPointer!).takeUnretainedValue()
        guard let requestContext, let handle else { return }
        guard let handler = daemon.takeUpgrade(for: requestContext) else {
            _ = CShims_MHD_upgrade_close(handle)
            return
        }
        var early: [UInt8] = []
        if let extraIn, extraInSize > 0 {
            extraIn.withMemoryRebound(to: UInt8.self, capacity: extraInSize) { early = Array(UnsafeBufferPointer(start: $0, count: extraInSize)) }
        }
        let connection = UpgradedConnection(socket: socket, early: early, handle: handle, daemon: daemon)
        daemon.upgradedOpened(connection)
        handler.upgraded(connection)
    }

extension LoopDaemon {
    /// The queued upgrade of the request whose context is `requestContext`, taken (once).
    func takeUpgrade(for requestContext: UnsafeMutableRawPointer) -> (any ConnectionUpgradeHandler)? {
        pendingUpgrades.removeValue(forKey: WordKey(requestContext))
    }
}
