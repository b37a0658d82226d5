import Foundation

/// Unknown keys (typos) and `TOKENGATE_<SECTION>_<KEY>` environment overrides.
extension ConfigurationLoader {
    typealias Config = TokenGateConfiguration

    /// Known keys of each mapping section.
    static let sectionKeys: [String: Set<String>] = [
        "server": Set(Config.Server.CodingKeys.allCases.map(\.rawValue)),
        "admin": Set(Config.Admin.CodingKeys.allCases.map(\.rawValue)),
        "database": Set(Config.Database.CodingKeys.allCases.map(\.rawValue)),
        "log": Set(Config.Log.CodingKeys.allCases.map(\.rawValue)),
        "encryption": Set(Config.Encryption.CodingKeys.allCases.map(\.rawValue)),
        "sessions": Set(Config.Sessions.CodingKeys.allCases.map(\.rawValue)),
        "sweeper": Set(Config.Sweeper.CodingKeys.allCases.map(\.rawValue)),
        "dpop": Set(Config.DPoP.CodingKeys.allCases.map(\.rawValue)),
        "faults": Set(Config.Faults.CodingKeys.allCases.map(\.rawValue)),
    ]

    /// Known keys of the elements of each list.
    static let elementKeys: [String: Set<String>] = [
        "clients": Set(Config.Client.CodingKeys.allCases.map(\.rawValue)),
        "providers": Set(Config.Provider.CodingKeys.allCases.map(\.rawValue)),
        "upstreams": Set(Config.Upstream.CodingKeys.allCases.map(\.rawValue)),
        "encryption.keys": Set(Config.Encryption.Key.CodingKeys.allCases.map(\.rawValue)),
    ]

    /// Settings whose environment value is a comma-separated list.
    static let listSettings: Set<String> = ["server.trusted_proxies", "dpop.algorithms"]

    static func unknownKeys(in tree: [String: Any]) -> [ConfigurationError.Problem] {
        var problems: [ConfigurationError.Problem] = []
        let sections = Set(Config.CodingKeys.allCases.map(\.rawValue))
        for (section, value) in tree.sorted(by: { $0.key < $1.key }) {
            guard sections.contains(section) else {
                problems.append(.init(key: section, message: "unknown section (known: \(sections.sorted().joined(separator: ", ")))"))
                continue
            }
            if let keys = sectionKeys[section], let mapping = value as? [String: Any] {
                problems += unknown(mapping, known: keys, at: section)
                if section == "encryption", let list = mapping["keys"] as? [Any] {
                    problems += unknownInElements(list, known: elementKeys["encryption.keys"]!, at: "encryption.keys")
                }
            } else if let keys = elementKeys[section], let list = value as? [Any] {
                problems += unknownInElements(list, known: keys, at: section)
            }
        }
        return problems
    }

    private static func unknownInElements(_ list: [Any], known: Set<String>, at path: String) -> [ConfigurationError.Problem] {
        list.enumerated().flatMap { index, element in
            (element as? [String: Any]).map { unknown($0, known: known, at: "\(path)[\(index)]") } ?? []
        }
    }

    private static func unknown(_ mapping: [String: Any], known: Set<String>, at path: String) -> [ConfigurationError.Problem] {
        mapping.keys.sorted().filter { !known.contains($0) }.map {
            .init(key: "\(path).\($0)", message: "unknown key (known: \(known.sorted().joined(separator: ", ")))")
        }
    }

    /// Applies `TOKENGATE_<SECTION>_<KEY>=value` for the mapping sections. Numbers and booleans are
    /// converted; an unknown key in a known section is a problem; other variables are ignored.
    static func applyOverrides(_ environment: [String: String], to tree: inout [String: Any]) -> [ConfigurationError.Problem] {
        var problems: [ConfigurationError.Problem] = []
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) where name.hasPrefix("TOKENGATE_") {
            let rest = name.dropFirst("TOKENGATE_".count).lowercased()
            guard let section = sectionKeys.keys.first(where: { rest.hasPrefix($0 + "_") }) else { continue }
            let key = String(rest.dropFirst(section.count + 1))
            guard let known = sectionKeys[section], known.contains(key), !(section == "encryption" && key == "keys") else {
                problems.append(.init(key: name, message: "unknown setting \(section).\(key)"))
                continue
            }
            var mapping = tree[section] as? [String: Any] ?? [:]
            if listSettings.contains("\(section).\(key)") {
                mapping[key] = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            } else if let number = Int(value) {
                mapping[key] = number
            } else if value == "true" || value == "false" {
                mapping[key] = value == "true"
            } else {
                mapping[key] = value
            }
            tree[section] = mapping
        }
        return problems
    }
}
