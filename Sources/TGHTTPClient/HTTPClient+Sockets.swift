import CCurl
import CEpoll
import TGEventLoop

// libcurl's socket and timer callbacks (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION): they
// put the transfers' sockets into the loop's epoll set and its timeout on the loop's timers. Both
// are called by libcurl on the loop's thread, from inside `curl_multi_socket_action` or
// `curl_multi_add_handle`.

/// One socket libcurl asked the loop to watch.
final class CurlSocket: EventLoopWatcher {
    /// Weak: the client may be in its deinit (waiting for its shutdown on the loop) meanwhile.
    weak var client: HTTPClient?
    let socket: Int32
    var token = -1

    init(client: HTTPClient, socket: Int32) {
        self.client = client
        self.socket = socket
    }

    func ready(_ events: UInt32) {
        var flags: Int32 = 0
        if events & EPOLLIN.rawValue != 0 { flags |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { flags |= CURL_CSELECT_ERR }
        client?.act(socket: socket, events: flags)
    }
}

let socketCallback: curl_socket_callback = { _, socket, what, clientPointer, socketPointer in
    let client = Unmanaged<HTTPClient>.fromOpaque(clientPointer!).takeUnretainedValue()
    if what == CURL_POLL_REMOVE {
        guard let socketPointer else { return 0 }
        let watched = Unmanaged<CurlSocket>.fromOpaque(socketPointer).takeRetainedValue()
        client.loop.unwatch(watched.token, fd: socket)
        curl_multi_assign(client.multi, socket, nil)
        return 0
    }
    var events: UInt32 = 0
    if what & CURL_POLL_IN != 0 { events |= EPOLLIN.rawValue }
    if what & CURL_POLL_OUT != 0 { events |= EPOLLOUT.rawValue }
    if let socketPointer {
        let watched = Unmanaged<CurlSocket>.fromOpaque(socketPointer).takeUnretainedValue()
        client.loop.modify(watched.token, fd: socket, events: events)
    } else {
        let watched = CurlSocket(client: client, socket: socket)
        watched.token = client.loop.watch(socket, events: events, watched)
        curl_multi_assign(client.multi, socket, Unmanaged.passRetained(watched).toOpaque())
    }
    return 0
}

let timerCallback: curl_multi_timer_callback = { _, milliseconds, clientPointer in
    let client = Unmanaged<HTTPClient>.fromOpaque(clientPointer!).takeUnretainedValue()
    client.timer?.cancel()
    client.timer = nil
    if milliseconds == 0 {
        client.timeoutDue = true
        client.loop.wakeSoon()
    } else if milliseconds > 0 {
        client.timer = client.loop.schedule(at: EventLoop.now() + Int64(milliseconds) * 1_000_000) { [weak client] in
            client?.timer = nil
            client?.act(socket: -1, events: 0)
        }
    }
    return 0
}
