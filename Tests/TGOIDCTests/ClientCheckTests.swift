import Foundation
import TGOIDC
import TGTesting
import Testing

/// `checkClient()`: a question only the client's credentials decide (revocation of a token that
/// was never issued), for refusals that do not say whether the grant or the client is refused.
@Suite struct ClientCheckTests {
    @Test func theRightCredentialsAreAcceptedAndTouchNoGrant() async throws {
        let fixture = try FakeProviderFixture.start()
        #expect(await fixture.provider.checkClient() == .accepted)
        let revoke = fixture.fake.requests(to: "/revoke")
        #expect(revoke.count == 1)
        #expect(revoke.first?.formValue("token_type_hint") == "refresh_token")
        await fixture.stop()
    }

    @Test func aWrongSecretIsRefused() async throws {
        let fixture = try FakeProviderFixture.start(authentication: .clientSecretBasic(secret: "wrong"))
        guard case .refused(let why) = await fixture.provider.checkClient() else {
            Issue.record("a wrong secret was not refused")
            return
        }
        #expect(why.contains("HTTP 401"))
        await fixture.stop()
    }

    @Test func aProviderWithoutRevocationCannotTell() async throws {
        let fixture = try FakeProviderFixture.start()
        fixture.fake.removeDiscoveryMember("revocation_endpoint")
        #expect(await fixture.provider.checkClient() == .cannotTell)
        await fixture.stop()
    }

    @Test func aProviderThatCannotAnswerIsUnavailableNotARefusal() async throws {
        let fixture = try FakeProviderFixture.start()
        fixture.fake.configure { $0.revocationFailure = .status(503) }
        #expect(await fixture.provider.checkClient() == .unavailable)
        fixture.fake.configure { $0.revocationFailure = .raw(status: 400, contentType: "application/json", body: #"{"error":"invalid_request"}"#) }
        #expect(await fixture.provider.checkClient() == .cannotTell)
        await fixture.stop()
    }
}
