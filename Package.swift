// swift-tools-version: 6.1
import PackageDescription

/// Settings every Swift target shares, so no C type leaks into a public signature
/// and every module builds under the same rules.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // Release builds leave out the run-time exclusivity checks (the compile-time ones stay):
    // every object a request touches lives on one event loop's thread, and debug and sanitizer
    // builds, which run the tests, keep the checks. They cost ~2 200 instructions per proxied
    // call (docs/architecture.md, "Where the time goes"). Each function in a section of its own,
    // private ones too, so the release link can lay out the code in use together
    // (scripts/symbol-order.txt). Small functions of one module are inlined into the next
    // (`-cross-module-optimization`: a request's getters, the loop's clock; ~800 instructions
    // per proxied call).
    .unsafeFlags(
        ["-enforce-exclusivity=unchecked", "-Xfrontend", "-function-sections", "-cross-module-optimization"],
        .when(configuration: .release)
    ),
]

/// The directory of this manifest (the release link reads scripts/symbol-order.txt).
let packageDirectory = String(#filePath.dropLast("/Package.swift".count))

let package = Package(
    name: "TokenGate",
    platforms: [.macOS(.v15), .iOS(.v16)],
    products: [
        .executable(name: "tokengate", targets: ["tokengate"]),
        // The app side (docs/apps.md): what an iOS or macOS app adds with SwiftPM. It builds none
        // of the server's modules and links none of its C libraries (scripts/check-imports.py).
        .library(name: "TokenGateClient", targets: ["TokenGateClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        // Metrics: the swift-metrics API in the domain, exported as Prometheus text by the app.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Start-up and shutdown of serve's parts as one service group (signals, graceful shutdown).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // The app library's SHA-256 and P-256 (PKCE, DPoP): CryptoKit on Apple's systems, the
        // same API over BoringSSL elsewhere. Either major version, as apps already pin one.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        // Layer 1: C libraries and the smallest shims over what Swift cannot import.
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // One shim per C library, so each wrapper links only its own library.
        .target(name: "CMicroHTTPDShims", dependencies: ["CMicroHTTPD"]),
        .target(name: "CCurlShims", dependencies: ["CCurl"], cSettings: [.define("CURL_STRICTER")]),
        .target(name: "COpenSSLShims", dependencies: ["COpenSSL"]),

        // Small value types every layer shares, with no dependency: form and query encoding,
        // UTF-8 byte access, JSON values with sorted-key output, the wall clock, Duration
        // conversions, the loopback check, the client key of per-client limits, single-flight.
        .target(name: "TGBase", swiftSettings: strictSettings),

        // Layer 2: Swift wrappers that know C but not OAuth.
        // The event loops (epoll, eventfd inbox, timers) that the HTTP server and client share.
        .target(name: "CEpoll"),
        .target(
            name: "TGEventLoop",
            dependencies: ["CEpoll"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "TGHTTPServer",
            dependencies: [
                "CMicroHTTPD", "CMicroHTTPDShims", "CEpoll", "TGEventLoop", "TGBase",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "TGHTTPClient",
            dependencies: [
                "CCurl", "CCurlShims", "CEpoll", "TGEventLoop", "TGBase",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            cSettings: [.define("CURL_STRICTER")],
            swiftSettings: strictSettings
        ),
        .target(
            name: "TGPostgres",
            dependencies: ["CLibPQ", "TGBase"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "TGCrypto",
            dependencies: ["COpenSSL", "COpenSSLShims", "TGBase"],
            swiftSettings: strictSettings
        ),

        // Persistence: one store per aggregate, with its SQL (the domain never sees SQL).
        .target(
            name: "TGStore",
            dependencies: ["TGPostgres", "TGBase"],
            // Migrations/ links to db/migrations: the SQL is compiled into the binary, so a binary
            // always knows exactly which schema versions it understands.
            resources: [.embedInCode("Migrations")],
            swiftSettings: strictSettings
        ),

        // Layer 3: domain that knows OAuth but not C.
        .target(
            name: "TGOIDC",
            dependencies: [
                "TGHTTPClient", "TGCrypto", "TGBase",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),

        .target(
            name: "TGAuth",
            dependencies: [
                "TGOIDC", "TGStore", "TGCrypto", "TGBase",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),

        // The proxy: an app's call forwarded to an API on the connection's event loop (knows HTTP,
        // not OAuth: the upstream token comes from whoever assembles it).
        .target(
            name: "TGProxy",
            dependencies: [
                "TGHTTPServer", "TGHTTPClient", "TGEventLoop", "TGBase",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),

        // Layer 4: routes, middleware, configuration; the executable is CLI only.
        .target(
            name: "TGApp",
            dependencies: [
                "TGHTTPServer", "TGHTTPClient", "TGPostgres", "TGStore", "TGCrypto", "TGOIDC", "TGAuth", "TGProxy", "TGEventLoop", "TGBase",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            // openapi.yaml links to the repository's API description, served at /openapi.yaml.
            resources: [.embedInCode("openapi.yaml")],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "tokengate",
            dependencies: [
                "TGApp", "TGAuth", "TGPostgres", "TGStore", "TGHTTPClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings,
            // Release builds allocate with mimalloc (Debian's libmimalloc2.0), which replaces
            // malloc for the whole process, libcurl and libmicrohttpd included: 3 % less CPU per
            // proxied call and 10 % less peak memory under a burst than glibc's
            // (docs/performance.md). Debug and sanitizer builds keep glibc's.
            // Release builds link with the toolchain's lld and pack their relocations (DT_RELR,
            // glibc 2.36): the loader reads 35 KB of them at start instead of 2 MB, which otherwise
            // stay resident (1.6 MiB less memory per process, docs/architecture.md, "Memory under a
            // burst"); linking takes seconds instead of most of a minute with gold. lld lays the
            // functions a running gateway uses out first, in the order of scripts/symbol-order.txt
            // (written by scripts/symbol-order.sh, checked in CI): 5 MiB less code resident.
            linkerSettings: [
                .linkedLibrary("mimalloc", .when(platforms: [.linux], configuration: .release)),
                .unsafeFlags(
                    [
                        "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                        "-Xlinker", "--symbol-ordering-file=\(packageDirectory)/scripts/symbol-order.txt",
                        "-Xlinker", "--no-warn-symbol-ordering",
                    ],
                    .when(platforms: [.linux], configuration: .release)
                ),
            ]
        ),

        // The app library (docs/apps.md): sign-in, tokens on demand, DPoP, accounts and transfer
        // codes against a TokenGate, over URLSession. No server module, no C library of the
        // server, and no unsafe flags (SwiftPM refuses them in a package's dependents).
        .target(
            name: "TokenGateClient",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ]
        ),

        // make dev's app side in Swift (scripts/app-example.sh): the library against the gateway.
        .executableTarget(
            name: "tokengate-app-example",
            dependencies: ["TokenGateClient"],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]
        ),

        // Load-test target for bench/ (not shipped): the server wrapper with fixed handlers.
        .executableTarget(
            name: "tokengate-bench-server",
            dependencies: ["TGEventLoop", "TGHTTPServer", "TGHTTPClient", .product(name: "HTTPTypes", package: "swift-http-types")],
            swiftSettings: strictSettings,
            // TokenGate's allocator, so that its routes compare with TokenGate's own (see above).
            linkerSettings: [.linkedLibrary("mimalloc", .when(platforms: [.linux], configuration: .release))]
        ),

        // Fuzz targets (make fuzz, docs/testing.md): one per parser of outside input. Built
        // normally they replay their seed corpus (fuzz/corpus/<name>); with
        // `-sanitize=fuzzer,address -DFUZZING` they are libFuzzer binaries.
        .systemLibrary(name: "CLibFuzzer", path: "Sources/Fuzz/CLibFuzzer"),
        .target(name: "TGFuzzing", dependencies: ["CLibFuzzer"], path: "Sources/Fuzz/Support", swiftSettings: strictSettings),
        .executableTarget(
            name: "tokengate-fuzz-form",
            dependencies: ["TGFuzzing", "TGBase"],
            path: "Sources/Fuzz/Form",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "tokengate-fuzz-jws",
            dependencies: ["TGFuzzing", "TGCrypto", "TGOIDC", "TGBase"],
            path: "Sources/Fuzz/JWS",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "tokengate-fuzz-token-response",
            dependencies: ["TGFuzzing", "TGOIDC"],
            path: "Sources/Fuzz/TokenResponse",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "tokengate-fuzz-proxy-path",
            dependencies: ["TGFuzzing", "TGProxy"],
            path: "Sources/Fuzz/ProxyPath",
            swiftSettings: strictSettings
        ),

        // Test support: test database, helpers shared by the suites.
        .target(
            name: "TGTesting",
            dependencies: [
                "TGPostgres", "TGHTTPClient", "TGHTTPServer", "TGCrypto", "TGBase",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),

        // Test support that drives the app in-process, without sockets (TestClient).
        .target(
            name: "TGAppTesting",
            dependencies: [
                "TGApp", "TGHTTPServer", "TGBase",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),

        .testTarget(
            name: "TGBaseTests",
            dependencies: ["TGBase"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGEventLoopTests",
            dependencies: ["TGEventLoop"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGHTTPServerTests",
            dependencies: ["TGHTTPServer", "TGHTTPClient", "TGTesting"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGHTTPClientTests",
            dependencies: ["TGHTTPClient", "TGHTTPServer", "TGTesting", "TGEventLoop", "TGProxy"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGPostgresTests",
            dependencies: ["TGPostgres", "TGTesting"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGStoreTests",
            dependencies: ["TGStore", "TGPostgres", "TGTesting"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGAuthTests",
            dependencies: [
                "TGAuth", "TGStore", "TGOIDC", "TGCrypto", "TGHTTPClient", "TGPostgres", "TGTesting", "TGBase",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGCryptoTests",
            dependencies: ["TGCrypto"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGOIDCTests",
            dependencies: [
                "TGOIDC", "TGCrypto", "TGHTTPClient", "TGHTTPServer", "TGTesting", "TGBase",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGTestingTests",
            dependencies: ["TGTesting", "TGHTTPClient", "TGCrypto"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TGAppTests",
            dependencies: [
                "TGApp", "TGAppTesting", "TGAuth", "TGOIDC", "TGCrypto", "TGHTTPClient", "TGPostgres", "TGStore", "TGTesting", "TGBase",
                "TGEventLoop", "TGProxy", "TokenGateClient",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
