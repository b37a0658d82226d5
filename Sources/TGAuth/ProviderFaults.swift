import Foundation
import Logging
import Synchronization
import TGOIDC
import TGStore

/// Per provider: when this instance last wrote a success for the safety valve, and when it last
/// saw the provider's client accepted. Only to spare the database statements; the shared truth
/// is `provider_faults`.
final class ProviderMarks: Sendable {
    private let marks = Mutex<[String: (success: Date, clientAccepted: Date)]>([:])

    /// Whether a success at `now` should be written (at most one a second per provider).
    func takeSuccessWrite(_ provider: String, now: Date) -> Bool {
        marks.withLock { marks in
            let last = marks[provider]?.success ?? .distantPast
            guard now.timeIntervalSince(last) >= 1 || now < last else { return false }
            marks[provider, default: (.distantPast, .distantPast)].success = now
            return true
        }
    }

    func clientAccepted(_ provider: String) -> Date? {
        marks.withLock { $0[provider].map(\.clientAccepted) }
    }

    func markClientAccepted(_ provider: String, at date: Date) {
        marks.withLock { $0[provider, default: (.distantPast, .distantPast)].clientAccepted = date }
    }
}

extension UpstreamTokens {
    /// Whether to ask a provider that may be failing as a whole.
    enum ProviderAttempt {
        /// Ask it now. `heldUntil`: this caller has the one attempt of all instances at a failing
        /// provider, until then; its outcome settles it, or ``releaseAttempt(_:heldUntil:)``.
        case ask(heldUntil: Date?)
        /// Answer 503 without asking; look again at this time.
        case wait(until: Date)
    }

    /// Whether the provider of `account` may be asked now, if it is failing as a whole: from
    /// memory, or from the grant's read of `provider_faults`. Once its backoff window is over,
    /// one caller of all instances has the attempt; the others wait for its outcome.
    func providerAttempt(_ provider: String, fault: ProviderFault?, now: Date) async throws -> ProviderAttempt {
        guard let fault, fault.kind != nil else { return .ask(heldUntil: nil) }
        if let until = waiting(provider, fault: fault, now: now) { return .wait(until: until) }
        let holdUntil = now.addingTimeInterval(settings.providerAttemptHold)
        guard case .notClaimed(let current) = try await store.providerFaults.claimAttempt(provider, now: now, holdUntil: holdUntil) else {
            return .ask(heldUntil: holdUntil)
        }
        // Not claimed: over meanwhile (the next call reads it afresh; this one holds the fault as it
        // was, which would settle the answer wrongly), or in a window, or asked by another caller.
        guard let current, current.kind != nil else { return .wait(until: now) }
        return .wait(until: waiting(provider, fault: current, now: now) ?? now)
    }

    /// Until when a failing provider is not to be asked, held in memory: the end of its backoff
    /// window, or, while another caller asks it, the next look at that attempt's outcome (not
    /// the attempt's hold: the provider may be back long before). nil: it may be attempted.
    private func waiting(_ provider: String, fault: ProviderFault, now: Date) -> Date? {
        if let retryAt = fault.retryAt, retryAt > now {
            providerBackoff.hold(provider, until: retryAt)
            return retryAt
        }
        guard let attemptUntil = fault.attemptUntil, attemptUntil > now else { return nil }
        let recheck = min(attemptUntil, now.addingTimeInterval(settings.providerAttemptRecheck))
        providerBackoff.hold(provider, until: recheck)
        return recheck
    }

    /// The attempt held until `heldUntil` ended without settling the provider (its caller did
    /// not ask, or heard about the grant only): the next caller may attempt it at once. Not
    /// releasing costs at most the hold; no error reaches the caller.
    func releaseAttempt(_ provider: String, heldUntil: Date) async {
        do {
            try await store.providerFaults.releaseAttempt(provider, heldUntil: heldUntil)
        } catch {
            logger.warning(
                "the attempt at a failing provider could not be released; the next waits for its hold",
                metadata: ["provider": .string(provider), "error_type": "\(type(of: error))"]
            )
        }
    }

    /// A refresh succeeded: a failing provider is failing no more, and what the valve kept comes
    /// back. Never fails the refresh (its token is already written).
    func providerRefreshed(_ provider: String, fault: ProviderFault?, now: Date) async {
        providerBackoff.clear(provider)
        do {
            if let fault, fault.kind != nil {
                let restored = try await store.transaction { transaction -> [UUID] in
                    guard let cleared = try await transaction.providerFaults.recordSuccess(provider, now: now) else { return [] }
                    guard cleared.kind == .rejections, let since = cleared.restoreFrom else { return [] }
                    return try await transaction.accounts.restore(provider: provider, rejectedSince: since, now: now)
                }
                metrics.providerFailing(provider, false)
                logger.notice(
                    "the identity provider answers refreshes again; every instance resumes them",
                    metadata: [
                        "provider": .string(provider), "was": .string(fault.kind?.rawValue ?? ""),
                        "failing_since": .string(fault.failingSince.map { "\($0)" } ?? ""), "accounts_restored": .stringConvertible(restored.count),
                    ]
                )
            } else if fault != nil, providerMarks.takeSuccessWrite(provider, now: now) {
                try await store.providerFaults.recordRefreshed(provider, now: now)
            }
        } catch {
            logger.warning(
                "a provider's recovery could not be recorded",
                metadata: ["provider": .string(provider), "error_type": "\(type(of: error))"]
            )
        }
    }

    /// The provider refused TokenGate itself: every grant is kept, the provider backs off as a
    /// whole for every instance, and the operator is told what to check.
    func providerRefusedClient(_ account: AccountSummary, reason: String, now: Date) async throws -> UpstreamRefreshOutcome {
        let (retryAt, failures) = try await failProvider(account.provider, kind: .client, reason: reason, restoreFrom: nil, now: now)
        logger.error(
            """
            the identity provider refuses TokenGate's client: no account is ended, refreshes wait for it on every instance; \
            check this provider's client_id, its credential and the client's registration and endpoints at the provider
            """,
            metadata: [
                "provider": .string(account.provider), "reason": .string(reason),
                "check": .string(credentialSetting(account.provider)), "retry_after": .stringConvertible(Self.seconds(until: retryAt, from: now)),
                "failures": .stringConvertible(failures),
            ]
        )
        return .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
    }

    /// The provider rejected this grant (or said nothing that tells it from a refused client,
    /// and the client checked out): end the account, unless the safety valve says the provider
    /// is at fault. The account is only suspended: its grant and sessions are kept through the
    /// grace period, so the valve can bring it back.
    func grantRejected(_ account: AccountSummary, reason: String, fault: ProviderFault?, now: Date) async throws -> UpstreamRefreshOutcome {
        if fault?.kind == .rejections {
            // The valve holds and this was its attempt: still rejected, still not believed.
            return try await valveHolds(account, reason: reason, restoreFrom: nil, now: now)
        }
        if fault?.kind == .client, try await store.providerFaults.recordSuccess(account.provider, now: now) != nil {
            // The provider judged the grant, so it took the client: that fault is over.
            providerBackoff.clear(account.provider)
            metrics.providerFailing(account.provider, false)
            logger.notice("the identity provider accepts TokenGate's client again", metadata: ["provider": .string(account.provider)])
        }
        let windowStart = now.addingTimeInterval(-settings.rejectionValveWindow)
        let valveCount = settings.rejectionValveCount
        let ended = try await store.transaction { transaction -> Int? in
            let rejected = try await transaction.providerFaults.recordRejection(
                account.provider,
                account: account.id,
                now: now,
                windowStart: windowStart
            )
            if valveCount > 0, rejected >= valveCount { return nil }
            return try await transaction.accounts.markStale(account.id, reason: reason, now: now)
        }
        guard let ended else {
            logger.error(
                """
                safety valve: too many grants of one provider rejected at once to believe them; no more accounts are ended, \
                and those ended in the window come back on the provider's next success
                """,
                metadata: [
                    "provider": .string(account.provider), "rejected": .stringConvertible(valveCount),
                    "window_seconds": .stringConvertible(Int(settings.rejectionValveWindow)), "reason": .string(reason),
                ]
            )
            return try await valveHolds(account, reason: reason, restoreFrom: windowStart, now: now)
        }
        logger.notice(
            "the provider rejected an account's grant: account stale, sessions ended",
            metadata: [
                "provider": .string(account.provider), "account": .string(account.id.uuidString.lowercased()),
                "sessions_ended": .stringConvertible(ended), "reason": .string(reason),
            ]
        )
        return .grantRejected
    }

    private func valveHolds(_ account: AccountSummary, reason: String, restoreFrom: Date?, now: Date) async throws -> UpstreamRefreshOutcome {
        let (retryAt, _) = try await failProvider(account.provider, kind: .rejections, reason: reason, restoreFrom: restoreFrom, now: now)
        return .providerUnavailable(retryAfter: Self.seconds(until: retryAt, from: now))
    }

    /// Marks the provider failing for every instance (one failure more), holds it in memory until
    /// its next attempt, and counts it. Returns that attempt's time and the failures so far.
    private func failProvider(
        _ provider: String,
        kind: ProviderFault.Kind,
        reason: String,
        restoreFrom: Date?,
        now: Date
    ) async throws -> (retryAt: Date, failures: Int) {
        let fault = try await store.providerFaults.markFailing(
            provider,
            kind: kind,
            reason: reason,
            restoreFrom: restoreFrom,
            now: now,
            backoffBase: settings.upstreamRefreshBackoffBase,
            backoffMax: settings.upstreamRefreshBackoffMax
        )
        let retryAt = fault.retryAt ?? now.addingTimeInterval(settings.upstreamRefreshBackoffBase)
        providerBackoff.hold(provider, until: retryAt)
        metrics.providerFault(provider, kind: kind)
        return (retryAt, fault.failures)
    }

    /// Whether the provider accepts TokenGate's client, asked at most once per
    /// ``AuthSettings/clientCheckLifetime`` per provider by all instances together.
    func checkClient(_ provider: OpenIDProvider, fault: ProviderFault?, now: Date) async -> OpenIDProvider.ClientCheck {
        let lifetime = settings.clientCheckLifetime
        for seen in [fault?.clientCheckedAt, providerMarks.clientAccepted(provider.name)] {
            // A check stamped a little ahead of `now` (another instance's clock, or the database's
            // microseconds rounding up) counts as recent.
            if let seen, now.timeIntervalSince(seen) < lifetime { return .accepted }
        }
        let check = await provider.checkClient()
        if check == .accepted {
            providerMarks.markClientAccepted(provider.name, at: now)
            try? await store.providerFaults.recordClientAccepted(provider.name, now: now)
        }
        return check
    }

    /// The configuration setting that holds the provider's client credential, for the log line.
    private func credentialSetting(_ provider: String) -> String {
        let method = providers[provider]?.configuration.clientAuthentication.description ?? "client_secret_basic"
        let setting = method == "private_key_jwt" ? "private_key (and private_key_certificate)" : "client_secret"
        return "providers[name=\(provider)].client_id and .\(setting) (\(method))"
    }
}
