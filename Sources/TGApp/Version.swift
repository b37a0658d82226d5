/// The TokenGate version reported by `tokengate version` and `/healthz`.
public let tokenGateVersion = "0.1.0"
