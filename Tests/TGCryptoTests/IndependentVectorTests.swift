import TGCrypto
import Testing

/// Signatures made by another implementation (pyca/cryptography 48 on OpenSSL 3, an RSA-2048 key
/// made for these tests), so a mistake shared by TGCrypto's signing and verifying (a wrong PSS
/// salt length, a wrong digest) cannot pass unnoticed as it could in a round trip.
enum IndependentRSAVectors {
    static let key = JWK(
        keyType: "RSA",
        modulus: "-OfITkLfmNHqtaARDSWP8SPKWWvr9XLHcakK_ajTvs8X3T2j7ebHo80bgRCy_H81kn3NzcpVX_rWJhSso_ihr7FN"
            + "pQE65dCBmt6DZAFpbZz7vosmef39wCOqIp2vKpDSibekiVc1MZO_kUrv1Rna7kopGqbkE71o5yW7H1whJqLM94cw"
            + "r5WsXNqZySTsehlMSBuLDqXW5mUHeO3mJDSCvrwycCEcqviH7Il14ZTCi3XwvQ3dBoiX6Q_GMpfbVMhF8_eJuVm7"
            + "S_UMx7pEItyuP7cXsNp-J04ei1oIQnqFwT3rF_Qv31QzT3Y4TEOK6nh9BuxvDj4uSIhVQexHgvXiYQ",
        exponent: "AQAB"
    )
    static let rs384 =
        "eyJhbGciOiJSUzM4NCJ9.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIiwic3ViIjoiYWxpY2UifQ.6cjlJ4qb"
        + "TKDZsGEYHq8OpNpCDTr-rZR3ConLIJHPct5MrKtL3HIO9XS4f5wBxH3bP2mNpydyMDcP5SaRJHYSj4_oGnSts3Io"
        + "oCO7e8RQNDO-wmCa1dU-33DsXGYA-chFhbvcuKXc1safxY2YI1KC53J5Dac3f_HNAWj5ibiK8GW1_ALeb4GgziST"
        + "AIerrNcb7GlwIoI3jDGizeME1Kt3sesTdyIB7VBTzJ2vAuQp4Cm-jQG2V82j80YnRnGol3dtAf873KzKK536p9cK"
        + "SSl-M48ZP7KE7zznZg06q1mxgxvGt05OU7lZORiUHmFgCOjRLmB3UbKfktdejWR9oZARTA"
    static let rs512 =
        "eyJhbGciOiJSUzUxMiJ9.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIiwic3ViIjoiYWxpY2UifQ.NO30HHAS"
        + "N8TrlznOrZLC6Qhv69z-jgCIx_YMSt3Iye-hkLy59JvbFRKWl_o4jcWdG1eKOhhXMC7jUrwddYCNsofifbdIbHSZ"
        + "Vqc-SJ6iosOtwRUzZ3lnFuEjRKUmytCBdsOZqEzeY7BI745TOKWEy8fRB_eF0iV3FoXstocBB9Fv5mCD-QF23hiM"
        + "vYRxy0B429PdS_NmnW_G55fmHLh4blsPsesw1eQMX97Q9sPy2m3O-CDeQjaEE4Cb0C6MhGXggcRpaZrtAfKiTBFX"
        + "__XoTjLMCYpROA8BHfuHwIPQAAsZ3fWqZLg5Twp8R2g4KQHDJZXhPhYN5YOP7VPNuEB4eQ"
    static let ps256 =
        "eyJhbGciOiJQUzI1NiJ9.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIiwic3ViIjoiYWxpY2UifQ.Qae33Flm"
        + "NpaomNZo_X0CaFlyZKq63QnijBydqhNk__V6E6Atnpe2XAeXB-Ts2-Bx48nzd0r_Zl_rcZqgyT1zcTGAqXgjyytx"
        + "wWyQiIYxQOqg7E5NUzf4o3Ui-ciXBQDeb7VI8O378U_nOKuRpp_28YsGqtRMlkC5Rv6SQS_fDb25EMTS9HzsZ6mk"
        + "UIqozd3kHudrpqyvGja4Gz0PuGsltv_rngaKUmt1v0V2EpwparO5FVpEK5wxwXJ0-DDyQHviBBLoYFM8Wb-FVhqb"
        + "9NH4BG4kpLaxmCSJAgkOC99Ayqe0pXPIwrS3kT_Mc-v2v2bKKkvv5qFgc6j1Pr6E9UJP7Q"
}

struct IndependentVectorTests {
    @Test(arguments: [
        (JWSAlgorithm.rs384, IndependentRSAVectors.rs384), (.rs512, IndependentRSAVectors.rs512), (.ps256, IndependentRSAVectors.ps256),
    ])
    func verifiesSignaturesMadeByAnotherImplementation(algorithm: JWSAlgorithm, compact: String) throws {
        let jws = try JWS(compactSerialization: compact)
        #expect(jws.algorithm == algorithm)
        try jws.verify(using: PublicKey(jwk: IndependentRSAVectors.key))
        #expect(String(decoding: jws.payload, as: UTF8.self) == #"{"iss":"https://idp.example","sub":"alice"}"#)
        // The same signature under another algorithm of the family must not verify.
        let other: JWSAlgorithm = algorithm == .ps256 ? .rs256 : .ps256
        let header = Base64URL.encode(Array(#"{"alg":"\#(other.rawValue)"}"#.utf8))
        let swapped = ([header] + compact.split(separator: ".").dropFirst().map(String.init)).joined(separator: ".")
        #expect(throws: CryptoError.invalidSignature) {
            try JWS(compactSerialization: swapped).verify(using: PublicKey(jwk: IndependentRSAVectors.key))
        }
    }
}
