import Foundation
import Testing

@testable import TGAuth

/// What an instance keeps of its upstream rotations to write them again after a failover.
@Suite struct RecentRotationsTests {
    func rotation(_ account: UUID, version: Int, refreshToken: String? = "rt") -> UpstreamRotation {
        let now = Date()
        return UpstreamRotation(
            account: account,
            version: version,
            refreshToken: refreshToken,
            refreshTokenExpiresAt: nil,
            idToken: nil,
            scopeKey: "",
            token: UpstreamAccessToken(value: "at", expiresAt: now.addingTimeInterval(60), scopes: [], issuedAt: now),
            forced: false
        )
    }

    @Test func keepsTheLatestRotationOfEachAccountOldestFirstAndNoneThatSpentNothing() {
        let kept = RecentRotations()
        let (a, b, c) = (UUID(), UUID(), UUID())
        kept.remember(rotation(a, version: 1))
        kept.remember(rotation(b, version: 1))
        kept.remember(rotation(a, version: 2))
        kept.remember(rotation(c, version: 1, refreshToken: nil))
        #expect(kept.recent().map(\.account) == [b, a])
        #expect(kept.recent().map(\.version) == [1, 2])
    }

    @Test func manyRotationsOfOneAccountKeepOne() {
        let kept = RecentRotations()
        let account = UUID()
        for version in 1...5000 { kept.remember(rotation(account, version: version)) }
        #expect(kept.recent().map(\.version) == [5000])
    }
}
