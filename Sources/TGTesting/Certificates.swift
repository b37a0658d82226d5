public import Foundation

/// A fresh self-signed certificate for localhost and 127.0.0.1 (EC P-256, valid one day), made
/// with the system `openssl` in `directory`: the paths of the certificate and its key.
public func makeSelfSignedCertificate(in directory: URL) async throws -> (certificate: String, key: String) {
    let certificate = directory.appendingPathComponent("cert.pem").path
    let key = directory.appendingPathComponent("key.pem").path
    let made = try await runProcess(
        "/usr/bin/openssl",
        [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", certificate,
        ]
    )
    guard made.exitCode == 0 else { throw CertificateFailed(detail: made.stderr) }
    return (certificate, key)
}

public struct CertificateFailed: Error {
    public var detail: String
}
