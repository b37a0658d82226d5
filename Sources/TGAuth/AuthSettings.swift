public import Foundation
import TGBase

/// Lifetimes and limits of TokenGate's own credentials.
public struct AuthSettings: Sendable {
    public var accessTokenTTL: TimeInterval = 900
    /// A session unused this long ends; every refresh pushes it forward.
    public var sessionIdleTTL: TimeInterval = 30 * 86400
    /// A session ends this long after its login, however much it is used.
    public var sessionAbsoluteTTL: TimeInterval = 90 * 86400
    public var handoffCodeTTL: TimeInterval = 60
    /// A device secret unused this long (no login with it, no refresh of its sessions) is refused.
    public var deviceIdleTTL: TimeInterval = 30 * 86400
    public var pendingLoginTTL: TimeInterval = 600
    /// A transfer code (re-link after a lost Keychain) can be redeemed this long after it was issued.
    public var transferCodeTTL: TimeInterval = 30 * 86400
    /// Live transfer codes a device may hold; a new one retires the oldest. 0 turns transfer codes off.
    public var transferCodesPerDevice = 3
    /// How long the previous refresh token of a session still gets the same answer (a retry after
    /// a lost response); after it, presenting it is reuse and ends the whole family.
    public var refreshReplayGrace: TimeInterval = 30
    /// The most rows one sweep or key-rotation statement touches.
    public var batchSize = 500
    /// An upstream access token is refreshed when it has less than this left (or a quarter of its
    /// lifetime, when that is shorter), so calls never carry one that expires on the way.
    public var upstreamRefreshAhead: TimeInterval = 60
    /// The lifetime assumed for an upstream access token whose provider gives no `expires_in`.
    public var upstreamDefaultLifetime: TimeInterval = 300
    /// After a refresh the provider could not answer, the grant is not tried again for this
    /// long, doubled after each further failure up to ``upstreamRefreshBackoffMax`` (or longer
    /// when the provider sent `Retry-After`); callers meanwhile get 503 with the time left.
    public var upstreamRefreshBackoffBase: TimeInterval = 2
    public var upstreamRefreshBackoffMax: TimeInterval = 300
    /// An API's 401 forces a refresh of the grant at most once per this long.
    public var forcedRefreshCooldown: TimeInterval = 30
    /// How long a removed grant's refresh token stays queued for revocation while its provider
    /// cannot be reached.
    public var revocationMaxAge: TimeInterval = 7 * 86400
    /// How long a call waits for another instance's refresh of the same grant before 503.
    public var grantLockWait: TimeInterval = 30
    /// The safety valve (docs/proxy.md, "When the provider refuses the refresh"): when this many
    /// distinct grants of one provider are rejected within ``rejectionValveWindow`` with no
    /// success between, the provider is believed at fault, not the grants: no more accounts are
    /// ended, and those ended in the window come back on its next success. 0 turns it off.
    public var rejectionValveCount = 20
    public var rejectionValveWindow: TimeInterval = 60
    /// A rejected grant's account stays (stale, its sessions suspended, the grant kept) this long
    /// before the sweeper removes it and revokes the grant: long enough for the valve to restore it.
    public var rejectedGrantGrace: TimeInterval = 86400
    /// A provider's client seen accepted by ``OpenIDProvider/checkClient()`` is believed so this long.
    public var clientCheckLifetime: TimeInterval = 60
    /// The one attempt at a failing provider holds off every other caller at most this long
    /// (when its caller never answers).
    public var providerAttemptHold: TimeInterval = 30
    /// While another caller makes that attempt, an instance looks at its outcome this often: the
    /// provider accepting again reaches every instance within this.
    public var providerAttemptRecheck: TimeInterval = 1
    /// How DPoP proofs are checked, for the apps whose tokens are bound (``AppClient/dpop``).
    public var dpop = DPoPSettings()

    public init() {}
}
