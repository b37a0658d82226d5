import Foundation
import HTTPTypes
import Synchronization
import TGEventLoop
import TGHTTPClient
import TGHTTPServer

/// `/loop/…`: one hop on the connection's loop through that loop's client, the way TokenGate's
/// proxy sends a call whose token is in memory, without its routes, sessions, policies or
/// metrics. What it does per call is what the C floor does (bench/floor/proxy_floor.c), so that
/// bench/profile.sh can tell the wrappers' cost from the domain's.
struct LoopHop: DeferredReply {
    let request: ServerRequest

    /// Whether `target` is `/loop/…`.
    static func matches(_ target: String) -> Bool {
        var target = target
        return target.withUTF8 { $0.count > 6 && memcmp($0.baseAddress!, "/loop/", 6) == 0 }
    }

    func start(_ responder: consuming LoopResponder) {
        let responder = copy responder
        guard let loop = request.loop, loop.index < loopClients.count else {
            responder.respond(ServerResponse(status: .serviceUnavailable))
            return
        }
        // The app's bearer token, when the floor was told one (`PROXY_FLOOR_APP_TOKEN`).
        if let expected = loopAuthorization {
            var matches = false
            _ = request.fields.withFirst(.authorization) { value in
                matches = value.count == expected.count && memcmp(value.baseAddress!, expected, value.count) == 0
            }
            guard matches else {
                responder.respond(ServerResponse(status: .unauthorized))
                return
            }
        }
        var lines = HeaderLines(capacity: 512)
        request.fields.forEachField { name, value in
            if !Self.dropped(name) { _ = lines.append(name: name, value: value) }
        }
        _ = lines.append("X-Forwarded-For", value: request.remoteAddress ?? "unknown")
        lines.append(contentsOf: loopForwarded)
        let requestID = Self.nextRequestID()
        _ = lines.append("X-Request-ID", value: requestID)
        let method = request.method
        let target = request.target
        do {
            let exchange = try loopClients[loop.index].startOnLoop(
                LoopRequest(
                    method: method.rawValue,
                    scheme: "http",
                    authority: upstream,
                    path: String(target[target.utf8.index(target.startIndex, offsetBy: 5)...]),
                    headers: lines,
                    sharedHeaders: loopBearer
                ),
                headTimeout: .seconds(10),
                idleTimeout: .seconds(10),
                wholeBodyUpTo: 64 * 1024
            )
            // The exchange lets go of this closure when it calls it.
            exchange.onHead = { result in
                guard case .success(let head) = result, exchange.isComplete else {
                    responder.respond(ServerResponse(status: .badGateway))
                    return
                }
                var response = ServerResponse(status: HTTPResponse.Status(code: head.status), body: .bytes(exchange.takeAll()))
                head.forEachField { name, value in
                    if !Self.notRelayed(name) { _ = response.rawHeaderFields.append(name: name, value: value) }
                }
                response.requestID = requestID
                responder.respond(response)
            }
        } catch {
            responder.respond(ServerResponse(status: .badGateway))
        }
    }

    /// The C floor's `request_dropped`.
    private static func dropped(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        droppedNames.contains { RawHeaderFields.equalsIgnoringCase(name, $0) }
    }

    /// The C floor's `answer_dropped`.
    private static func notRelayed(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        notRelayedNames.contains { RawHeaderFields.equalsIgnoringCase(name, $0) }
    }

    private static let droppedNames: [StaticString] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "proxy-authorization",
        "host", "authorization", "cookie", "content-length", "expect", "forwarded", "x-forwarded-for", "x-forwarded-proto",
        "x-forwarded-host", "x-real-ip", "x-request-id",
    ]
    private static let notRelayedNames: [StaticString] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "proxy-authenticate",
        "set-cookie", "x-request-id", "server", "date", "content-length",
    ]

    private static let counter = Atomic<UInt64>(0)

    /// 15 characters, as TokenGate's and the C floor's: a fixed prefix of 8 and a counter in 7
    /// base-64 digits (a string that short needs no allocation).
    private static func nextRequestID() -> String {
        let number = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return String(unsafeUninitializedCapacity: 15) { buffer in
            UnsafeMutableRawPointer(buffer.baseAddress!).storeBytes(of: prefix, as: UInt64.self)
            digits.withUnsafeBufferPointer { digits in
                for index in 0..<7 { buffer[8 + index] = digits[Int((number >> (36 - 6 * UInt64(index))) & 0x3F)] }
            }
            return 15
        }
    }
    /// "wrappers" as one word.
    private static let prefix = UInt64(littleEndian: 0x7372_6570_7061_7277)
    private static let digits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
}

/// `X-Forwarded-Proto` and `-Host` as the C floor sends them (`PROXY_FLOOR_PUBLIC_HOST`).
let loopForwarded: HeaderLines = {
    var lines = HeaderLines(capacity: 128)
    _ = lines.append("X-Forwarded-Proto", value: "http")
    _ = lines.append("X-Forwarded-Host", value: ProcessInfo.processInfo.environment["PROXY_FLOOR_PUBLIC_HOST"] ?? "127.0.0.1")
    return lines
}()
/// `Bearer <PROXY_FLOOR_APP_TOKEN>`, the app's field the floor accepts, when it was told one.
let loopAuthorization = ProcessInfo.processInfo.environment["PROXY_FLOOR_APP_TOKEN"].map { Array("Bearer \($0)".utf8) }

/// The floor's token (`PROXY_FLOOR_TOKEN`, as the benches set it), one shared line.
let loopBearer: SharedHeaderLines = {
    var lines = HeaderLines(capacity: 64)
    _ = lines.appendBearer(ProcessInfo.processInfo.environment["PROXY_FLOOR_TOKEN"] ?? "upstream-token")
    return SharedHeaderLines(lines)
}()
