import Foundation

/// A secret value from configuration: printed, dumped and encoded as `<redacted>`, never as itself.
public struct Secret: Sendable, Equatable, Codable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The secret itself. Pass it on only to the code that needs it; never log it.
    public let value: String
    /// Why the secret could not be read (validation reports it), nil when it was.
    let problem: String?

    public init(_ value: String) {
        self.value = value
        self.problem = nil
    }

    private init(problem: String) {
        self.value = ""
        self.problem = problem
    }

    /// Decodes a ``SecretSource`` and resolves it with the environment in the decoder's user info.
    public init(from decoder: any Decoder) throws {
        let source = try SecretSource(from: decoder)
        let environment = decoder.userInfo[.environment] as? [String: String] ?? [:]
        switch source.resolve(environment: environment) {
        case .success(let secret): self = secret
        case .failure(let problem): self.init(problem: problem.text)
        }
    }

    /// Encodes as `<redacted>`: an encoded configuration never carries a secret.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode("<redacted>")
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// Where a secret comes from, as written in the configuration file (after oauth2-proxy's
/// `secret_source`): a plain string is an inline value; or one of `{value: …}`, `{env: NAME}`,
/// `{file: /path}` (a trailing newline is trimmed).
enum SecretSource: Decodable {
    case value(String)
    case environment(String)
    case file(String)

    private enum CodingKeys: String, CodingKey {
        case value, env, file
    }

    init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer(), let text = try? single.decode(String.self) {
            self = .value(text)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let present = container.allKeys
        guard present.count == 1, let key = present.first else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a secret needs exactly one of value, env, file")
            )
        }
        let text = try container.decode(String.self, forKey: key)
        switch key {
        case .value: self = .value(text)
        case .env: self = .environment(text)
        case .file: self = .file(text)
        }
    }

    /// The secret, or a problem message (never containing the secret).
    func resolve(environment: [String: String]) -> Result<Secret, ConfigurationProblemText> {
        switch self {
        case .value(let text):
            return .success(Secret(text))
        case .environment(let name):
            guard let text = environment[name], !text.isEmpty else {
                return .failure(ConfigurationProblemText("environment variable \(name) is not set"))
            }
            return .success(Secret(text))
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                return .failure(ConfigurationProblemText("cannot read secret file \(path)"))
            }
            var text = String(decoding: data, as: UTF8.self)
            while text.last == "\n" || text.last == "\r" { text.removeLast() }
            return .success(Secret(text))
        }
    }
}

extension CodingUserInfoKey {
    /// The environment secrets and overrides are read from (injected, never read globally).
    static let environment = CodingUserInfoKey(rawValue: "tokengate.environment")!
}

struct ConfigurationProblemText: Error {
    var text: String
    init(_ text: String) { self.text = text }
}
