import Foundation
import Synchronization
import TGTesting
import Testing
import TokenGateClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The browser of the app library's tests: follows the sign-in's (or logout's) redirects over
/// real HTTP with the system curl — the gateway's login, the fake provider's authorization (which
/// signs in ``user`` without a form), the gateway's callback — until one goes to the app's
/// scheme, and returns that URL, as `ASWebAuthenticationSession` does.
final class RedirectFollowingBrowser: BrowserSession {
    let fake: FakeIdentityProvider
    /// Who signs in at the fake provider next.
    let user = Mutex("alice")
    /// Every URL the browser was opened at.
    let opened = Mutex<[URL]>([])
    /// What the next session does instead of following: close (the user cancelled).
    let cancelsNext = Mutex(false)
    /// Changes the URL the next session comes back with (an answer meant for another login).
    let altersNextReturn = Mutex<(@Sendable (URL) -> URL)?>(nil)

    init(fake: FakeIdentityProvider) {
        self.fake = fake
    }

    func authenticate(at url: URL, callbackScheme: String, ephemeral: Bool) async throws -> URL {
        opened.withLock { $0.append(url) }
        let cancels = cancelsNext.withLock { cancels in
            defer { cancels = false }
            return cancels
        }
        if cancels { throw TokenGateClientError.cancelled }
        let user = user.withLock { $0 }
        fake.configure { $0.fakeUser = user }
        var next = url.absoluteString
        for _ in 0..<8 {
            let answer = try await curl(["-s", "-i", next])
            guard let location = answer.header("Location") else {
                throw TokenGateClientError.invalidResponse("the browser stopped at \(next): \(answer.stdout.prefix(300))")
            }
            if location.hasPrefix(callbackScheme + ":") {
                let back = try #require(URL(string: location))
                let alter = altersNextReturn.withLock { alter in
                    defer { alter = nil }
                    return alter
                }
                return alter?(back) ?? back
            }
            next = URL(string: location, relativeTo: URL(string: next))?.absoluteString ?? location
        }
        throw TokenGateClientError.invalidResponse("too many redirects")
    }
}

/// The library's transport in tests: URLSession over real sockets, every request recorded, and
/// the answer of chosen token requests lost after the gateway acted on them (as a phone's
/// network drops an answer), or a request refused before it leaves (a foreign origin's).
final class RecordingTransport: HTTPTransport {
    struct Sent: Sendable {
        let url: URL
        let authorization: String?
        let dpop: String?
        /// The `grant_type` of a token request.
        let grantType: String?
    }

    private let inner = URLSessionTransport(configuration: .ephemeral)
    private let log = Mutex<[Sent]>([])
    /// How many answers of token requests with this grant type to lose.
    private let losing = Mutex<[String: Int]>([:])

    var sent: [Sent] { log.withLock { $0 } }

    /// Token requests sent with `grantType`.
    func count(_ grantType: String) -> Int { sent.filter { $0.grantType == grantType }.count }

    /// Requests to URLs whose path ends with `suffix`.
    func calls(to suffix: String) -> [Sent] { sent.filter { $0.url.path.hasSuffix(suffix) } }

    /// The next `count` answers to token requests of `grantType` are lost after the gateway
    /// answered them.
    func loseAnswers(of grantType: String, count: Int = 1) { losing.withLock { $0[grantType] = count } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let form = request.httpBody.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let grantType = form.split(separator: "&").first { $0.hasPrefix("grant_type=") }.map {
            String($0.dropFirst("grant_type=".count)).removingPercentEncoding ?? ""
        }
        log.withLock {
            $0.append(
                Sent(
                    url: request.url!,
                    authorization: request.value(forHTTPHeaderField: "Authorization"),
                    dpop: request.value(forHTTPHeaderField: "DPoP"),
                    grantType: grantType
                )
            )
        }
        let answer = try await inner.send(request)
        let lose =
            grantType.map { grant in
                losing.withLock { losing in
                    guard let left = losing[grant], left > 0 else { return false }
                    losing[grant] = left - 1
                    return true
                }
            } ?? false
        if lose { throw URLError(.networkConnectionLost) }
        return answer
    }
}

/// A clock the test moves.
final class TestClock: Sendable {
    private let current = Mutex(Date())

    var now: @Sendable () -> Date { { [self] in current.withLock { $0 } } }

    func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// One app install against the harness's gateway: the library with the test browser, an
/// in-memory credential store, a transfer store in a temporary file, the recording transport and
/// the test clock.
struct AppInstall {
    let client: TokenGateClient
    let browser: RedirectFollowingBrowser
    let credentials: InMemoryCredentialStore
    let transfers: FileTransferStore
    let transport: RecordingTransport
    let clock: TestClock

    init(
        _ h: AuthFlowHarness,
        usesDPoP: Bool = false,
        postLogoutRedirectURI: String? = nil,
        credentials: InMemoryCredentialStore = InMemoryCredentialStore(),
        transfers: FileTransferStore? = nil
    ) {
        browser = RedirectFollowingBrowser(fake: h.fake)
        self.credentials = credentials
        self.transfers =
            transfers ?? FileTransferStore(file: FileManager.default.temporaryDirectory.appendingPathComponent("transfer-\(UUID().uuidString).json"))
        transport = RecordingTransport()
        clock = TestClock()
        client = TokenGateClient(
            configuration: TokenGateClient.Configuration(
                gatewayURL: URL(string: h.baseURL)!,
                clientID: AuthFlowHarness.appClient,
                redirectURI: AuthFlowHarness.appRedirect,
                postLogoutRedirectURI: postLogoutRedirectURI,
                usesDPoP: usesDPoP
            ),
            browser: browser,
            credentials: credentials,
            transfers: self.transfers,
            dpopKey: usesDPoP ? SoftwareDPoPKey() : nil,
            transport: transport,
            now: clock.now
        )
    }

    /// `path` under the gateway, as a request.
    func request(_ h: AuthFlowHarness, _ path: String, method: String = "GET", body: String? = nil) -> URLRequest {
        var request = URLRequest(url: URL(string: h.baseURL + path)!)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return request
    }
}

extension HTTPURLResponse {
    var status: Int { statusCode }
}

/// The JSON object of `data`.
func object(_ data: Data) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
}

/// A credential store whose writes fail while ``failsWrites`` is set (a full disk, a process
/// killed in the middle of a write: the write did not happen).
final class FlakyCredentialStore: CredentialStore {
    let inner = InMemoryCredentialStore()
    let failsWrites = Mutex(false)

    struct WriteFailed: Error {}

    func data(for key: String) throws -> Data? { inner.data(for: key) }

    func set(_ data: Data, for key: String) throws {
        if failsWrites.withLock({ $0 }) { throw WriteFailed() }
        inner.set(data, for: key)
    }

    func remove(_ key: String) throws { inner.remove(key) }
}
