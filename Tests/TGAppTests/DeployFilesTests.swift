import Foundation
import TGApp
import TGTesting
import Testing
import Yams

/// The files in `deploy/` say what operations rely on: the configurations they ship load and
/// validate, probes point at the right endpoints, the process runs unprivileged and gets time to
/// drain, and the linters and schema validators of `scripts/deploy-lint.sh` pass and stay live.
/// (`deploy/nginx` runs for real in ``NginxFrontTests``; the image runs for real in
/// `scripts/image.sh test`, CI's step after `make test`. No cluster runs here: the manifests are
/// checked against Kubernetes' schemas only.)
@Suite struct DeployFilesTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../deploy").standardized

    static func text(_ path: String) throws -> String {
        try String(contentsOf: deploy.appendingPathComponent(path), encoding: .utf8)
    }

    /// Loads a shipped configuration with its secret files replaced by stand-ins in a temporary
    /// directory: it must pass TokenGate's own validation.
    @discardableResult
    static func loads(_ configuration: String, secretsAt directory: String, environment: [String: String] = [:]) throws -> TokenGateConfiguration {
        let stand = FileManager.default.temporaryDirectory.appendingPathComponent("tg-deploy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: stand, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: stand) }
        let secrets = [
            "database-url": "postgresql://tokengate:pw@127.0.0.1:5432/tokengate", "key-k1": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
            "idp-client-secret": "s3cret",
        ]
        for (name, value) in secrets { try value.write(to: stand.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        let file = stand.appendingPathComponent("tokengate.yaml")
        try configuration.replacingOccurrences(of: directory, with: stand.path + "/").write(to: file, atomically: true, encoding: .utf8)
        return try ConfigurationLoader.load(path: file.path, environment: environment)
    }

    @Test func theKubernetesManifestsProbeMigrateDrainAndShipAValidConfiguration() throws {
        let documents = try Yams.load_all(yaml: Self.text("kubernetes/tokengate.yaml")).compactMap { $0 as? [String: Any] }
        func document(_ kind: String) throws -> [String: Any] { try #require(documents.first { $0["kind"] as? String == kind }) }
        #expect(
            Set(documents.compactMap { $0["kind"] as? String })
                == ["Secret", "ConfigMap", "Job", "Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget"]
        )

        let deployment = try #require(try document("Deployment")["spec"] as? [String: Any])
        #expect((deployment["replicas"] as? Int ?? 0) >= 2)
        let pod = try #require((deployment["template"] as? [String: Any])?["spec"] as? [String: Any])
        #expect((pod["terminationGracePeriodSeconds"] as? Int ?? 0) > 15)
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        #expect(((container["livenessProbe"] as? [String: Any])?["httpGet"] as? [String: Any])?["path"] as? String == "/healthz")
        #expect(((container["readinessProbe"] as? [String: Any])?["httpGet"] as? [String: Any])?["path"] as? String == "/readyz")
        #expect((container["args"] as? [String])?.first == "serve")
        #expect(((pod["securityContext"] as? [String: Any])?["runAsNonRoot"] as? Bool) == true)

        let job = try #require(try document("Job")["spec"] as? [String: Any])
        let jobPod = try #require((job["template"] as? [String: Any])?["spec"] as? [String: Any])
        #expect(((jobPod["containers"] as? [[String: Any]])?.first?["args"] as? [String])?.first == "migrate")

        // Every secret file the configuration reads is a key of the Secret.
        let configuration = try #require((try document("ConfigMap")["data"] as? [String: String])?["tokengate.yaml"])
        let keys = Set(try #require((try document("Secret")["stringData"] as? [String: String])?.keys))
        let read = configuration.components(separatedBy: "/etc/tokengate/secrets/").dropFirst().map { String($0.prefix { $0 != " " && $0 != "}" }) }
        #expect(!read.isEmpty && Set(read).isSubset(of: keys), "\(read) not all in \(keys)")
        try Self.loads(configuration, secretsAt: "/etc/tokengate/secrets/")
    }

    /// Prometheus scrapes the admin listener (the public port answers /metrics 404); the probes stay
    /// on the public port; no Service exposes the admin port, and only monitoring may reach it.
    @Test func metricsAreScrapedFromTheAdminPortWhichNoServiceExposes() throws {
        let documents = try Yams.load_all(yaml: Self.text("kubernetes/tokengate.yaml")).compactMap { $0 as? [String: Any] }
        func document(_ kind: String) throws -> [String: Any] { try #require(documents.first { $0["kind"] as? String == kind }) }
        let template = try #require((try document("Deployment")["spec"] as? [String: Any])?["template"] as? [String: Any])
        let annotations = try #require((template["metadata"] as? [String: Any])?["annotations"] as? [String: String])
        let container = try #require(((template["spec"] as? [String: Any])?["containers"] as? [[String: Any]])?.first)
        let ports = try #require(container["ports"] as? [[String: Any]])
        let admin = try #require(ports.first { $0["name"] as? String == "admin" }?["containerPort"] as? Int)
        #expect(annotations["prometheus.io/port"] == String(admin) && annotations["prometheus.io/path"] == "/metrics")
        for probe in ["livenessProbe", "readinessProbe"] {
            #expect(((container[probe] as? [String: Any])?["httpGet"] as? [String: Any])?["port"] as? String == "http", "\(probe)")
        }
        let servicePorts = try #require((try document("Service")["spec"] as? [String: Any])?["ports"] as? [[String: Any]])
        #expect(servicePorts.allSatisfy { $0["targetPort"] as? String == "http" })
        let rules = try #require((try document("NetworkPolicy")["spec"] as? [String: Any])?["ingress"] as? [[String: Any]])
        let adminRule = try #require(rules.first { ($0["ports"] as? [[String: Any]])?.contains { $0["port"] as? String == "admin" } == true })
        #expect(adminRule["from"] != nil)
        // The image listens there: its ENV sets the admin listener to every interface, port 9090.
        let containerfile = try Self.text("container/Containerfile")
        #expect(containerfile.contains("TOKENGATE_ADMIN_HOST=0.0.0.0 TOKENGATE_ADMIN_PORT=\(admin)"))
        #expect(containerfile.contains("EXPOSE 8080 \(admin)"))
    }

    @Test func theComposeFileMigratesBeforeServingAndShipsAValidConfiguration() throws {
        let compose = try #require(try Yams.load(yaml: Self.text("compose.yaml")) as? [String: Any])
        let services = try #require(compose["services"] as? [String: Any])
        #expect(Set(services.keys) == ["postgres", "migrate", "tokengate", "nginx"])
        let tokengate = try #require(services["tokengate"] as? [String: Any])
        let waitsFor = (tokengate["depends_on"] as? [String: Any])?["migrate"] as? [String: Any]
        #expect(waitsFor?["condition"] as? String == "service_completed_successfully")
        // nginx runs the tested site file, not a copy of it.
        #expect(((services["nginx"] as? [String: Any])?["volumes"] as? [String])?.contains { $0.hasPrefix("./nginx/tokengate.conf:") } == true)
        try Self.loads(Self.text("tokengate.compose.yaml"), secretsAt: "/run/secrets/", environment: ["IDP_CLIENT_SECRET": "s3cret"])
    }

    /// Forwarding headers are trusted only from a proxy the file itself deploys: nginx at its fixed
    /// address in the compose file; nothing in the Kubernetes file, which deploys no proxy.
    @Test func theShippedFilesTrustOnlyTheProxiesTheyDeploy() throws {
        let compose = try #require(try Yams.load(yaml: Self.text("compose.yaml")) as? [String: Any])
        let nginx = try #require((compose["services"] as? [String: Any])?["nginx"] as? [String: Any])
        let address = try #require(((nginx["networks"] as? [String: Any])?["gateway"] as? [String: Any])?["ipv4_address"] as? String)
        let composed = try Self.loads(Self.text("tokengate.compose.yaml"), secretsAt: "/run/secrets/", environment: ["IDP_CLIENT_SECRET": "s3cret"])
        #expect(composed.server.trustedProxies == [address])
        let documents = try Yams.load_all(yaml: Self.text("kubernetes/tokengate.yaml")).compactMap { $0 as? [String: Any] }
        let configMap = try #require(documents.first { $0["kind"] as? String == "ConfigMap" })
        let text = try #require((configMap["data"] as? [String: String])?["tokengate.yaml"])
        #expect(try Self.loads(text, secretsAt: "/etc/tokengate/secrets/").server.trustedProxies.isEmpty)
    }

    @Test func theSystemdUnitRunsUnprivilegedHardenedAndDrainsOnSIGTERM() throws {
        let unit = try Self.text("systemd/tokengate.service")
        let lines = Set(unit.split(separator: "\n").map(String.init))
        for required in [
            "User=tokengate", "LimitCORE=0", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "KillSignal=SIGTERM",
            "CapabilityBoundingSet=", "ExecStart=/usr/local/bin/tokengate serve --config /etc/tokengate/tokengate.yaml",
            "ExecStartPre=/usr/local/bin/tokengate migrate --config /etc/tokengate/tokengate.yaml",
        ] {
            #expect(lines.contains(required), "missing \(required)")
        }
        let stop = lines.first { $0.hasPrefix("TimeoutStopSec=") }.flatMap { Int($0.dropFirst("TimeoutStopSec=".count)) }
        #expect((stop ?? 0) > 10, "TimeoutStopSec must leave the drain (10 s) its time")
    }

    /// Nothing is pulled and nothing runs at build time (the image has no shell): an empty image,
    /// the Debian root filesystem of `deploy/container/rootfs.sh`, the binary built on the host.
    @Test func theContainerImageIsTheDebianRootFilesystemAndTheBinaryRunAsANonRootUser() throws {
        let file = try Self.text("container/Containerfile").split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
        #expect(file.filter { $0.hasPrefix("FROM ") } == ["FROM scratch"])
        #expect(file.contains("ADD rootfs.tar /"))
        #expect(file.contains("COPY tokengate /usr/local/bin/tokengate"))
        #expect(!file.contains { $0.hasPrefix("RUN ") })
        #expect(file.contains("USER 10001:10001"))
        #expect(file.contains("STOPSIGNAL SIGTERM"))
        let rootfs = try Self.text("container/rootfs.sh")
        #expect(rootfs.contains("'tokengate:x:10001:10001:"))
        #expect(rootfs.contains("'tokengate:x:10001:'"))
    }

    /// The release binary links these shared libraries (mimalloc only in release builds:
    /// Package.swift; libstdc++ for Swift's runtime, linked in statically); an image without one
    /// of them would not start. `scripts/image.sh smoke` checks the same inside the image with ld.so.
    @Test func theRootFilesystemHasEveryLibraryTheReleaseBinaryLinks() throws {
        let rootfs = try Self.text("container/rootfs.sh")
        let include = try #require(rootfs.firstMatch(of: /--include=([^ ]+)/)?.output.1)
        let packages = Set(include.split(separator: ",").map(String.init))
        for package in ["libmicrohttpd12", "libcurl4", "libpq5", "libssl3", "libmimalloc2.0", "libstdc++6", "ca-certificates", "tzdata"] {
            #expect(packages.contains(package), "the root filesystem lacks \(package)")
        }
    }

    /// The benchmarks, `make release` and CI measure the binary the image ships: the flags of
    /// `bench/lib.sh`'s `RELEASE_FLAGS` (static Swift runtime, whole-program optimization at link
    /// time) on every release build, read from each file rather than restated here.
    @Test func theBenchmarksBuildTokenGateAsTheContainerImageDoes() throws {
        func read(_ path: String) throws -> String {
            try String(contentsOf: Self.deploy.appendingPathComponent("../\(path)"), encoding: .utf8)
        }
        /// The options of the first `swift build` line matching `pattern`, without `except`.
        func options(_ text: String, _ pattern: Regex<(Substring, Substring)>, except: Set<String> = []) throws -> Set<String> {
            let line = try #require(text.firstMatch(of: pattern)?.output.1)
            return Set(line.split(separator: " ").map(String.init)).subtracting(except)
        }
        let flags = try options(read("bench/lib.sh"), /RELEASE_FLAGS=\(([^)]*)\)/)
        #expect(flags.isSuperset(of: ["-c", "release", "--static-swift-stdlib", "--experimental-lto-mode=full"]))
        #expect(try options(read("scripts/image.sh"), /timeout 3600 swift build ([^\n]*)\n/, except: ["--product", "tokengate"]) == flags)
        #expect(try options(read("Makefile"), /release: deps\n\tswift build ([^\n]*)\n/) == flags)
        #expect(try options(read(".ci/run"), /\$\(swift build ([^)]*) --show-bin-path\)/) == flags)
    }

    /// Both pods (the migration Job's and the Deployment's) meet the Pod Security Standards'
    /// `restricted` profile, so the manifest applies in a namespace that enforces it.
    @Test func theKubernetesPodsMeetTheRestrictedPodSecurityProfile() throws {
        let documents = try Yams.load_all(yaml: Self.text("kubernetes/tokengate.yaml")).compactMap { $0 as? [String: Any] }
        for kind in ["Job", "Deployment"] {
            let spec = try #require(documents.first { $0["kind"] as? String == kind }?["spec"] as? [String: Any])
            let pod = try #require((spec["template"] as? [String: Any])?["spec"] as? [String: Any])
            let context = try #require(pod["securityContext"] as? [String: Any])
            #expect(context["runAsNonRoot"] as? Bool == true, "\(kind)")
            #expect((context["runAsUser"] as? Int ?? 0) != 0, "\(kind)")
            #expect((context["seccompProfile"] as? [String: Any])?["type"] as? String == "RuntimeDefault", "\(kind)")
            for container in try #require(pod["containers"] as? [[String: Any]]) {
                let security = try #require(container["securityContext"] as? [String: Any])
                #expect(security["allowPrivilegeEscalation"] as? Bool == false, "\(kind)")
                #expect(security["readOnlyRootFilesystem"] as? Bool == true, "\(kind)")
                #expect((security["capabilities"] as? [String: Any])?["drop"] as? [String] == ["ALL"], "\(kind)")
            }
        }
    }

    /// Runs `scripts/deploy-lint.sh` on a copy of `deploy/`, with `breaking` applied to one file.
    static func lint(breaking file: String? = nil, replace original: String = "", with broken: String = "") async throws -> ProcessResult {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("tg-deploy-lint-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: deploy, to: copy)
        defer { try? FileManager.default.removeItem(at: copy) }
        if let file {
            let path = copy.appendingPathComponent(file)
            let text = try String(contentsOf: path, encoding: .utf8)
            #expect(text.contains(original), "\(file) no longer contains \(original)")
            try text.replacingOccurrences(of: original, with: broken).write(to: path, atomically: true, encoding: .utf8)
        }
        let script = deploy.deletingLastPathComponent().appendingPathComponent("scripts/deploy-lint.sh").path
        return try await runProcess("/bin/bash", [script, copy.path])
    }

    /// hadolint, kubernetes-validate and systemd-analyze pass on the shipped files (`make lint` runs
    /// the same script).
    @Test func theDeployFilesPassHadolintKubernetesValidateAndSystemdAnalyze() async throws {
        let result = try await Self.lint()
        #expect(result.exitCode == 0, "\(result.stdout)\n\(result.stderr)")
    }

    struct Breakage: Sendable, CustomTestStringConvertible {
        var file: String
        var original: String
        var broken: String
        /// The line of scripts/deploy-lint.sh that must name the failure.
        var failure: String
        var testDescription: String { "\(file): \(original.trimmingCharacters(in: .newlines)) → \(broken)" }
    }

    /// Each check is live: a copy broken in one place fails, naming the check and the file.
    @Test(arguments: [
        // hadolint DL3002: the last USER is root.
        Breakage(
            file: "container/Containerfile",
            original: "USER 10001:10001",
            broken: "USER root",
            failure: "hadolint: deploy/container/Containerfile"
        ),
        // A misspelt field, which a cluster would drop silently: the strict schema refuses it.
        Breakage(
            file: "kubernetes/tokengate.yaml",
            original: "readOnlyRootFilesystem: true",
            broken: "readOnlyRootFileSystem: true",
            failure: "kubernetes-validate (Kubernetes 1.30.0): kubernetes/tokengate.yaml"
        ),
        // The preStop sleep's required field.
        Breakage(
            file: "kubernetes/tokengate.yaml",
            original: "sleep: { seconds: 5 }",
            broken: "sleep: { second: 5 }",
            failure: "kubernetes-validate (Kubernetes latest): kubernetes/tokengate.yaml"
        ),
        // systemd ignores a value it cannot parse with a warning and exit code 0.
        Breakage(file: "systemd/tokengate.service", original: "KillSignal=SIGTERM", broken: "KillSignal=SIGTERN", failure: "systemd-analyze verify"),
        Breakage(file: "systemd/tokengate.service", original: "ProtectSystem=strict\n", broken: "", failure: "systemd-analyze security"),
    ])
    func eachDeployCheckFailsOnACopyBrokenForIt(_ breakage: Breakage) async throws {
        let result = try await Self.lint(breaking: breakage.file, replace: breakage.original, with: breakage.broken)
        #expect(result.exitCode == 1, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stderr.contains("deploy-lint: \(breakage.failure)"), "\(result.stderr)")
    }

    /// `deploy/prometheus` and `deploy/grafana`: every rule and panel is well formed, and every
    /// metric they use is one TokenGate exports (a metric name in its sources) and documents
    /// (docs/operations.md).
    @Test func theAlertRulesAndTheDashboardUseOnlyMetricsTokenGateExports() throws {
        var expressions: [String] = []
        let rules = try #require(try Yams.load(yaml: try Self.text("prometheus/tokengate-alerts.yaml")) as? [String: Any])
        for group in try #require(rules["groups"] as? [[String: Any]]) {
            for rule in try #require(group["rules"] as? [[String: Any]]) {
                let annotations = rule["annotations"] as? [String: Any]
                #expect(rule["alert"] is String && annotations?["summary"] is String && annotations?["description"] is String)
                #expect((rule["labels"] as? [String: Any])?["severity"] is String)
                expressions.append(try #require(rule["expr"] as? String))
            }
        }
        #expect(expressions.count >= 8)
        let dashboard = try JSONSerialization.jsonObject(with: Data(try Self.text("grafana/tokengate-dashboard.json").utf8))
        let panels = try #require((dashboard as? [String: Any])?["panels"] as? [[String: Any]])
        for panel in panels {
            #expect(panel["title"] is String && panel["gridPos"] is [String: Any])
            let targets = try #require(panel["targets"] as? [[String: Any]])
            expressions += targets.compactMap { $0["expr"] as? String }
        }
        let name = /tokengate_[a-z_]+/
        let used = Set(
            expressions.flatMap { $0.matches(of: name).map { String($0.output) } }.map { metric in
                ["_bucket", "_sum", "_count"].reduce(metric) { $0.hasSuffix($1) ? String($0.dropLast($1.count)) : $0 }
            }
        )
        // What the sources name as metrics: labels such as "tokengate_proxy_calls_total", and the
        // `# TYPE` lines the request metrics write themselves.
        let sources = Self.deploy.deletingLastPathComponent().appendingPathComponent("Sources")
        var exported: Set<String> = []
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            exported.formUnion(text.matches(of: /(?:"|# TYPE )(tokengate_[a-z_]+)[" ]/).map { String($0.output.1) })
        }
        let documented = try String(
            contentsOf: Self.deploy.deletingLastPathComponent().appendingPathComponent("docs/operations.md"),
            encoding: .utf8
        )
        #expect(used.count >= 10)
        #expect(used.subtracting(exported).sorted() == [], "metrics the dashboard or alerts use that TokenGate does not export")
        #expect(used.filter { !documented.contains("`\($0)`") }.sorted() == [], "metrics not in docs/operations.md")
    }
}
