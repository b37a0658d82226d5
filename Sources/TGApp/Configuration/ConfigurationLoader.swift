import Foundation
import Yams

/// Every problem found in a configuration, each with the key it concerns.
public struct ConfigurationError: Error, CustomStringConvertible {
    public struct Problem: Sendable, Equatable {
        /// Where: `server.port`, `providers[1].issuer`, `TOKENGATE_SERVER_PORT`, or the file.
        public var key: String
        public var message: String
    }

    public var problems: [Problem]

    public var description: String {
        "configuration has \(problems.count) problem(s):\n" + problems.map { "  \($0.key): \($0.message)" }.joined(separator: "\n")
    }
}

/// Reads the configuration file, applies `TOKENGATE_*` overrides from an injected environment,
/// decodes, and validates — reporting every problem at once.
public enum ConfigurationLoader {
    static let listSections: Set<String> = ["clients", "providers", "upstreams"]

    /// Loads `path` (YAML for `.yaml`/`.yml`, JSON for `.json`; nil: defaults and environment only).
    public static func load(path: String?, environment: [String: String]) throws(ConfigurationError) -> TokenGateConfiguration {
        try load(path: path, environment: environment, bounds: SettingBounds())
    }

    /// ``load(path:environment:)``, recording every numeric setting's declared bounds into `bounds`.
    static func load(path: String?, environment: [String: String], bounds: SettingBounds) throws(ConfigurationError) -> TokenGateConfiguration {
        var problems: [ConfigurationError.Problem] = []
        var tree: [String: Any] = [:]
        if let path {
            do {
                tree = try readTree(path)
            } catch let error as ConfigurationProblemText {
                throw ConfigurationError(problems: [.init(key: path, message: error.text)])
            } catch {
                throw ConfigurationError(problems: [.init(key: path, message: "cannot be read")])
            }
        }
        problems += unknownKeys(in: tree)
        problems += applyOverrides(environment, to: &tree)
        for section in TokenGateConfiguration.CodingKeys.allCases.map(\.rawValue) where tree[section] == nil {
            tree[section] = listSections.contains(section) ? [Any]() : [String: Any]()
        }
        let configuration: TokenGateConfiguration
        do {
            let data = try JSONSerialization.data(withJSONObject: tree)
            let decoder = JSONDecoder()
            decoder.userInfo[.environment] = environment
            decoder.userInfo[.settingBounds] = bounds
            configuration = try decoder.decode(TokenGateConfiguration.self, from: data)
        } catch let error as DecodingError {
            throw ConfigurationError(problems: problems + [problem(from: error)])
        } catch {
            throw ConfigurationError(problems: problems + [.init(key: "(file)", message: "is not a valid configuration")])
        }
        problems += ConfigurationValidator(configuration: configuration, outOfBounds: bounds.problems).problems()
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return configuration
    }

    /// What a valid `configuration` allows but deserves a second look (a non-loopback admin host),
    /// each with its key: `check-config` prints them on standard error, `serve` logs them.
    public static func warnings(_ configuration: TokenGateConfiguration) -> [ConfigurationError.Problem] {
        ConfigurationValidator(configuration: configuration).warnings()
    }

    /// The effective configuration as pretty JSON, every secret printed as `<redacted>`.
    public static func renderRedacted(_ configuration: TokenGateConfiguration) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(configuration) else { return "{}" }
        var text = String(decoding: data, as: UTF8.self)
        if let url = configuration.database.url?.value, !url.isEmpty {
            text = text.replacingOccurrences(of: url, with: "<redacted>")
        }
        return text
    }

    private static func readTree(_ path: String) throws -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationProblemText("file not found or not readable")
        }
        let object: Any?
        if path.hasSuffix(".json") {
            guard let parsed = try? JSONSerialization.jsonObject(with: data) else {
                throw ConfigurationProblemText("is not valid JSON")
            }
            object = parsed
        } else if path.hasSuffix(".yaml") || path.hasSuffix(".yml") {
            do {
                object = try Yams.load(yaml: String(decoding: data, as: UTF8.self))
            } catch {
                throw ConfigurationProblemText("is not valid YAML (\(String(describing: error).prefix(200)))")
            }
        } else {
            throw ConfigurationProblemText("must end in .yaml, .yml or .json")
        }
        guard let dictionary = jsonCompatible(object ?? [String: Any]()) as? [String: Any] else {
            throw ConfigurationProblemText("must be a mapping of sections (server, database, …)")
        }
        return dictionary
    }

    /// YAML can produce dates and other scalars JSON cannot hold: they become strings.
    private static func jsonCompatible(_ value: Any) -> Any {
        switch value {
        case let dictionary as [String: Any]: dictionary.mapValues(jsonCompatible)
        case let dictionary as [AnyHashable: Any]:
            Dictionary(uniqueKeysWithValues: dictionary.map { ("\($0.key)", jsonCompatible($0.value)) })
        case let array as [Any]: array.map(jsonCompatible)
        case is String, is Int, is Double, is Bool: value
        case is NSNull: value
        default: "\(value)"
        }
    }

    /// `providers[1].issuer` for a coding path; `(file)` for the top.
    static func keyPath(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text.isEmpty ? "(file)" : text
    }

    private static func problem(from error: DecodingError) -> ConfigurationError.Problem {
        switch error {
        case .typeMismatch(let type, let context):
            return .init(key: keyPath(context.codingPath), message: "must be \(describe(type))")
        case .valueNotFound(let type, let context):
            return .init(key: keyPath(context.codingPath), message: "must be \(describe(type)), not null")
        case .keyNotFound(let key, let context):
            return .init(key: keyPath(context.codingPath + [key]), message: "is required")
        case .dataCorrupted(let context):
            return .init(key: keyPath(context.codingPath), message: context.debugDescription)
        @unknown default:
            return .init(key: "(file)", message: "is not a valid configuration")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Int.Type: "a whole number"
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is [Any].Type, is [String].Type: "a list"
        default: "a mapping"
        }
    }
}
