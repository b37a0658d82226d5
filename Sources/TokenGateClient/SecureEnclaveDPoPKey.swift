#if canImport(CryptoKit) && !os(Linux)
import CryptoKit
public import Foundation

/// A DPoP key in the Secure Enclave: the private key never leaves it; what is kept is the
/// enclave's handle, useless on another device.
public struct SecureEnclaveDPoPKey: DPoPKey {
    let key: SecureEnclave.P256.Signing.PrivateKey

    public static var isAvailable: Bool { SecureEnclave.isAvailable }

    public init() throws {
        key = try SecureEnclave.P256.Signing.PrivateKey()
    }

    public init(dataRepresentation: Data) throws {
        key = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: dataRepresentation)
    }

    /// The enclave's handle to the key, for a ``CredentialStore``.
    public var dataRepresentation: Data { key.dataRepresentation }

    public var publicKeyX963: Data { key.publicKey.x963Representation }

    public func signature(for message: Data) throws -> Data {
        try key.signature(for: message).rawRepresentation
    }
}
#endif
