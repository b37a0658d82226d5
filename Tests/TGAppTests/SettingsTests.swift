import Foundation
import Testing

@testable import TGApp

/// What holds for every setting, so that a new one needs no test of its own for it: its bounds
/// refuse what lies just outside them (declared where it is decoded, `SettingBounds.swift`), and
/// it has a row in the documentation's tables of settings.
@Suite struct SettingsTests {
    /// A valid configuration with one provider and one API, so that the settings of list
    /// elements are decoded (and their bounds declared) too.
    static func base() -> [String: Any] {
        [
            "database": ["url": "postgresql://127.0.0.1:1/unused"],
            "providers": [["name": "idp", "issuer": "https://idp.example.com", "client_id": "a", "client_secret": "s"]],
            "upstreams": [["name": "api", "base_url": "https://api.example.com", "provider": "idp"]],
        ]
    }

    /// Loads `tree` as a JSON file: the problems found, and the bounds its decoding declared.
    static func load(_ tree: [String: Any]) throws -> (problems: [ConfigurationError.Problem], declared: [SettingBounds.Bound]) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tg-settings-\(UUID().uuidString).json").path
        try JSONSerialization.data(withJSONObject: tree).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let bounds = SettingBounds()
        do {
            _ = try ConfigurationLoader.load(path: path, environment: [:], bounds: bounds)
            return ([], bounds.declared)
        } catch {
            return (error.problems, bounds.declared)
        }
    }

    /// `tree` with `value` at a key path such as `upstreams[0].max_body_bytes`.
    static func setting(_ path: String, to value: Int, in tree: [String: Any]) -> [String: Any] {
        enum Step {
            case key(String)
            case index(Int)
        }
        let steps = path.split(separator: ".").flatMap { part -> [Step] in
            let pieces = part.split(separator: "[")
            return [.key(String(pieces[0]))] + pieces.dropFirst().map { .index(Int($0.dropLast())!) }
        }
        func set(_ steps: ArraySlice<Step>, in node: Any?) -> Any {
            switch steps.first {
            case nil:
                return value
            case .key(let key):
                var mapping = node as? [String: Any] ?? [:]
                mapping[key] = set(steps.dropFirst(), in: mapping[key])
                return mapping
            case .index(let index):
                var list = node as? [Any] ?? []
                list[index] = set(steps.dropFirst(), in: list[index])
                return list
            }
        }
        return set(steps[...], in: tree) as! [String: Any]
    }

    /// Every bounded setting, each section's and each list element's: its default and both its
    /// bounds load; one below the lower bound and one above the upper are refused, naming the
    /// setting with its message and nothing else.
    @Test func everyBoundedSettingTakesItsDefaultAndItsBoundsAndRefusesAValueJustOutside() throws {
        let loaded = try Self.load(Self.base())
        #expect(loaded.problems == [])
        let keys = loaded.declared.map(\.key)
        #expect(Set(keys).count == keys.count, "a setting declared twice: \(keys)")
        for key in ["server.connection_limit", "sessions.memory_cache_entries", "upstreams[0].max_body_bytes", "providers[0].clock_skew_seconds"] {
            #expect(keys.contains(key), "\(key) is not declared")
        }
        for bound in loaded.declared {
            var accepted = [bound.range.lowerBound] + (bound.defaultValue.map { [$0] } ?? [])
            var refused = [bound.range.lowerBound - 1]
            if bound.range.upperBound < Int.max {
                accepted.append(bound.range.upperBound)
                refused.append(bound.range.upperBound + 1)
            }
            for value in accepted {
                let problems = try Self.load(Self.setting(bound.key, to: value, in: Self.base())).problems
                #expect(problems == [], "\(bound.key): \(value)")
            }
            for value in refused {
                let problems = try Self.load(Self.setting(bound.key, to: value, in: Self.base())).problems
                #expect(problems == [.init(key: bound.key, message: bound.message)], "\(bound.key): \(value)")
            }
        }
    }

    /// The rows of the tables of settings (header `| key | …`) in a file of docs/: each row's
    /// key names (the backticked names of its first cell) and the whole row.
    static func documentedSettings(_ file: String) throws -> [(names: [String], row: String)] {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs").standardized
        let text = try String(contentsOf: docs.appendingPathComponent(file), encoding: .utf8)
        var rows: [(names: [String], row: String)] = []
        var inSettingsTable = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            guard line.hasPrefix("|") else {
                inSettingsTable = false
                continue
            }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.first == "key" { inSettingsTable = true }
            guard inSettingsTable, let first = cells.first else { continue }
            let names = first.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
            rows.append((names.map { String($0.element) }, line))
        }
        return rows
    }

    /// Every key of every section and list element (what `ConfigurationLoader+Keys.swift` knows)
    /// has a row in docs/operations.md's tables of settings, `upstreams[].max_body_bytes` for an
    /// element's; a provider's in docs/providers.md's, where operations.md sends the reader. A
    /// bounded setting's row states its default: first in the default column of operations.md,
    /// as `default N` in providers.md.
    @Test func everySettingHasARowInTheDocumentationThatStatesItsDefault() throws {
        let operations = try Self.documentedSettings("operations.md")
        let providers = try Self.documentedSettings("providers.md")
        var keys: [(key: String, rows: [(names: [String], row: String)])] = []
        for (section, names) in ConfigurationLoader.sectionKeys {
            keys += names.map { ("\(section).\($0)", operations) }
        }
        for (list, names) in ConfigurationLoader.elementKeys {
            keys += names.map { list == "providers" ? ($0, providers) : ("\(list)[].\($0)", operations) }
        }
        var undocumented: [String] = []
        for (key, rows) in keys where !rows.contains(where: { $0.names.contains(key) || $0.names.contains(key + "[]") }) {
            undocumented.append(key)
        }
        #expect(undocumented.sorted() == [], "settings without a row in docs/operations.md (providers: docs/providers.md)")
        for bound in try Self.load(Self.base()).declared {
            guard let value = bound.defaultValue else { continue }
            let key = bound.key.replacingOccurrences(of: "[0]", with: "[]")
            if key.hasPrefix("providers[].") {
                let name = String(key.dropFirst("providers[].".count))
                guard let row = providers.first(where: { $0.names.contains(name) })?.row else { continue }
                #expect(row.contains("default \(value)"), "docs/providers.md, \(name): default \(value)")
            } else {
                guard let row = operations.first(where: { $0.names.contains(key) })?.row else { continue }
                let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
                #expect(cells.count > 1 && cells[1].prefix(while: \.isNumber) == "\(value)", "docs/operations.md, \(key): default \(value)")
            }
        }
    }
}
