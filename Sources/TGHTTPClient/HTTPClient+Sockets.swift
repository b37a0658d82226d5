import CCurl
import CEpoll
import Glibc
import TGBase
import TGEventLoop

// libcurl's socket, close and timer callbacks (CURLMOPT_SOCKETFUNCTION, CURLOPT_CLOSESOCKETFUNCTION,
// CURLMOPT_TIMERFUNCTION): they put the transfers' sockets into the loop's epoll set and its
// timeout where the client's hook before every wait finds it. All are called by libcurl on the
// loop's thread, from inside `curl_multi_socket_action`, `curl_multi_add_handle`,
// `curl_multi_remove_handle` or `curl_multi_cleanup`.
//
// A socket libcurl stops watching (its connection goes back to libcurl's pool) stays in the epoll
// set, parked: the next request on that connection costs no `epoll_ctl` and no allocation. A
// parked socket that reports an event (the upstream closed the idle connection) leaves the set
// then; libcurl finds the connection dead when it next looks. Every upstream socket is closed
// through `closeSocketCallback`, which takes it out of the set and the table before the number
// can be reused.

/// One socket libcurl asked the loop to watch.
final class CurlSocket: EventLoopWatcher {
    /// Not counted, and not weak (a weak reference gives the client a side table, which makes every
    /// retain and release of it on every call take the slow path): the client outlives every
    /// event of its sockets, since its shutdown, which its deinit waits for, closes them all on
    /// the loop (`curl_multi_cleanup` through `closeSocketCallback`), taking each out of the epoll
    /// set, before the deinit returns.
    unowned(unsafe) let client: HTTPClient
    let socket: Int32
    var token = -1
    /// The events registered in the epoll set (0: not in it).
    var registered: UInt32 = 0
    /// libcurl no longer watches it (no transfer on the connection), but it stays registered.
    var parked = false

    init(client: HTTPClient, socket: Int32) {
        self.client = client
        self.socket = socket
    }

    func ready(_ events: UInt32) {
        if parked {
            client.forgetSocket(socket)
            return
        }
        var flags: Int32 = 0
        if events & EPOLLIN.rawValue != 0 { flags |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { flags |= CURL_CSELECT_ERR }
        client.act(socket: socket, events: flags)
    }
}

extension HTTPClient {
    /// Takes `socket` out of the epoll set and the table (it is closing, or parked and woke up).
    func forgetSocket(_ socket: Int32) {
        guard let watched = sockets.removeValue(forKey: WordKey(socket)) else { return }
        if watched.registered != 0 { loop.unwatch(watched.token, fd: socket) }
    }

    /// libcurl wants `what` (`CURL_POLL_IN`, `_OUT`, `_INOUT` or `_REMOVE`) for `socket`.
    func watchSocket(_ socket: Int32, _ what: Int32) {
        if what == CURL_POLL_REMOVE {
            sockets[WordKey(socket)]?.parked = true
            return
        }
        var events: UInt32 = 0
        if what & CURL_POLL_IN != 0 { events |= EPOLLIN.rawValue }
        if what & CURL_POLL_OUT != 0 { events |= EPOLLOUT.rawValue }
        let watched: CurlSocket
        if let known = sockets[WordKey(socket)] {
            watched = known
        } else {
            watched = CurlSocket(client: self, socket: socket)
            sockets[WordKey(socket)] = watched
        }
        watched.parked = false
        if watched.registered == 0 {
            watched.token = loop.watch(socket, events: events, watched)
        } else if watched.registered != events {
            loop.modify(watched.token, fd: socket, events: events)
        }
        watched.registered = events
    }
}

// The client is borrowed, not retained, in the callbacks below: it outlives its multi handle
// (its shutdown cleans the handle up on the loop before it can go).

let socketCallback: curl_socket_callback = { _, socket, what, clientPointer, _ in
    Unmanaged<HTTPClient>.fromOpaque(clientPointer!)._withUnsafeGuaranteedRef { $0.watchSocket(socket, what) }
    return 0
}

let closeSocketCallback: curl_closesocket_callback = { clientPointer, socket in
    Unmanaged<HTTPClient>.fromOpaque(clientPointer!).takeUnretainedValue().forgetSocket(socket)
    return close(socket)
}

let timerCallback: curl_multi_timer_callback = { _, milliseconds, clientPointer in
    Unmanaged<HTTPClient>.fromOpaque(clientPointer!)._withUnsafeGuaranteedRef { client in
        // A deadline the hook before every wait acts on (`HTTPClient.beforeWait`), not a loop
        // timer: libcurl moves it several times per transfer, and a timer's move in the loop's
        // heap cost each move a few hundred instructions.
        if milliseconds > 0 {
            client.curlDeadline = EventLoop.now() + Int64(milliseconds) * 1_000_000
        } else {
            client.curlDeadline = nil
            if milliseconds == 0 {
                client.timeoutDue = true
                client.loop.wakeSoon()
            }
        }
    }
    return 0
}

extension HTTPClient {
    /// How many upstream sockets are in the loop's epoll set (watched or parked); for tests.
    func socketsInEpollSet() async -> Int {
        await withCheckedContinuation { continuation in
            let context = UnmanagedClient(client: Unmanaged.passRetained(self))
            let accepted = loop.execute {
                let client = context.client.takeRetainedValue()
                continuation.resume(returning: client.sockets.count)
            }
            if !accepted {
                context.client.release()
                continuation.resume(returning: 0)
            }
        }
    }
}
