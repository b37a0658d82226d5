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

/// A self-signed RSA 2048 certificate as Entra ID's docs make one for a certificate credential
/// (`openssl req -x509 -newkey rsa:2048`), in a fresh temporary directory: the paths of the
/// certificate and its key, and the directory (the caller removes it).
public func makeRSACertificate() async throws -> (certificate: String, key: String, directory: URL) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-cert-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let certificate = directory.appendingPathComponent("cert.pem").path
    let key = directory.appendingPathComponent("key.pem").path
    let made = try await runProcess(
        "/usr/bin/openssl",
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=tokengate", "-keyout", key, "-out", certificate]
    )
    guard made.exitCode == 0 else { throw CertificateFailed(detail: made.stderr) }
    return (certificate, key, directory)
}

public struct CertificateFailed: Error {
    public var detail: String
}
