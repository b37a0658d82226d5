#if canImport(Glibc)
import Glibc
#endif

/// The listening sockets of a server: one per loop, all bound to the same address with
/// `SO_REUSEPORT`, so the kernel spreads new connections over the loops without a shared accept.
/// A server of one loop (the admin listener) binds without it: no other socket can then join
/// its port, so a port another process holds fails the start instead of being shared with it.
struct ListenSockets {
    let descriptors: [Int32]
    let family: Int32
    /// The port bound (the one the kernel chose, when asked for port 0).
    let port: UInt16

    static let backlog: Int32 = 4096

    /// Binds `count` sockets to `host`:`port`; the first chooses the port when `port` is 0.
    static func bind(host: String, port: UInt16, count: Int) throws -> ListenSockets {
        var storage = sockaddr_storage()
        let family = try fill(&storage, host: host, port: port)
        var descriptors: [Int32] = []
        var boundPort = port
        do {
            for _ in 0..<max(1, count) {
                let socket = Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard socket >= 0 else { throw HTTPServerError.startFailed(errno: errno) }
                descriptors.append(socket)
                var on: Int32 = 1
                setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
                if count > 1 { setsockopt(socket, SOL_SOCKET, SO_REUSEPORT, &on, socklen_t(MemoryLayout<Int32>.size)) }
                if family == AF_INET6 {
                    setsockopt(socket, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size))
                }
                setPort(&storage, family: family, port: boundPort)
                let length = family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size
                let bound = withUnsafePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket, $0, socklen_t(length)) }
                }
                guard bound == 0, listen(socket, backlog) == 0 else { throw HTTPServerError.startFailed(errno: errno) }
                if boundPort == 0 { boundPort = localPort(socket) }
            }
        } catch {
            for descriptor in descriptors { close(descriptor) }
            throw error
        }
        return ListenSockets(descriptors: descriptors, family: family, port: boundPort)
    }

    private static func localPort(_ socket: Int32) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return withUnsafeBytes(of: &storage) { raw in
            // sin_port and sin6_port sit at the same offset, in network order.
            UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self))
        }
    }

    private static func setPort(_ storage: inout sockaddr_storage, family: Int32, port: UInt16) {
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.storeBytes(of: port.bigEndian, toByteOffset: 2, as: UInt16.self)
        }
    }

    private static func fill(_ storage: inout sockaddr_storage, host: String, port: UInt16) throws -> Int32 {
        try withUnsafeMutableBytes(of: &storage) { raw in
            let v4 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
            if inet_pton(AF_INET, host, &v4.pointee.sin_addr) == 1 {
                v4.pointee.sin_family = sa_family_t(AF_INET)
                v4.pointee.sin_port = port.bigEndian
                return AF_INET
            }
            let v6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
            if inet_pton(AF_INET6, host, &v6.pointee.sin6_addr) == 1 {
                v6.pointee.sin6_family = sa_family_t(AF_INET6)
                v6.pointee.sin6_port = port.bigEndian
                return AF_INET6
            }
            throw HTTPServerError.invalidAddress
        }
    }
}

/// A one-shot wake-up between two threads, for code that must wait without Swift concurrency.
final class OneShotSignal: @unchecked Sendable {
    // Invariant: `semaphore` is initialised in init and destroyed in deinit; sem_post/sem_wait are
    // thread-safe.
    private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init() {
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func signal() { sem_post(semaphore) }

    func wait() {
        while sem_wait(semaphore) != 0, errno == EINTR {}
    }
}
