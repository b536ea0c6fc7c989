// swift-tools-version:6.2
import Foundation
import PackageDescription

// librdkafka: scripts/setup.sh builds 2.8.0 into .deps/librdkafka when the system's is older (Debian 12
// ships 2.0.2). Pointing the compiler and the linker there here, with an rpath, means `swift build` and
// the binaries work without anyone exporting PKG_CONFIG_PATH or LD_LIBRARY_PATH.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
let localRdkafka = "\(packageRoot)/.deps/librdkafka"
let hasLocalRdkafka = FileManager.default.fileExists(atPath: "\(localRdkafka)/include/librdkafka/rdkafka.h")
let rdkafkaSwiftSettings: [SwiftSetting] =
    hasLocalRdkafka ? [.unsafeFlags(["-Xcc", "-I\(localRdkafka)/include"])] : []
let rdkafkaLinkerSettings: [LinkerSetting] =
    hasLocalRdkafka
    ? [.unsafeFlags(["-L\(localRdkafka)/lib", "-Xlinker", "-rpath", "-Xlinker", "\(localRdkafka)/lib"])] : []

// Every Swift target: warnings are errors; an import is internal unless a declaration it serves is public
// (InternalImportsByDefault); a member is visible only where its module is imported (MemberImportVisibility); an
// existential is written `any` (ExistentialAny). A release build optimizes across modules: a receipt job crosses
// a dozen of them (Runtime, Flows, AppleVerification, Vocabulary, Ledger, Kafka...), and a generic or a small
// function of another module was called, not specialized or inlined (docs/benchmarks.md, "Across modules").
let strict: [SwiftSetting] = [
    .treatAllWarnings(as: .error), .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"), .enableUpcomingFeature("ExistentialAny"),
    .unsafeFlags(["-cross-module-optimization"], .when(configuration: .release)),
]

// The source revision the binary is built from, for `--version` and `receipt_worker_build_info`: the environment's
// RECEIPT_WORKER_REVISION (an image build, which has no .git), else the clone's git HEAD (read from its files: the
// manifest runs no program), else "unknown". Read when the manifest is evaluated: a fresh clone's build (CI, a
// release, an image) has the right one; an incremental build during development may keep an older one.
func sourceRevision() -> String {
    let given = ProcessInfo.processInfo.environment["RECEIPT_WORKER_REVISION"] ?? ""
    func plain(_ text: String) -> String? {
        let hex = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return (7...64).contains(hex.count) && hex.allSatisfy(\.isHexDigit) ? hex.lowercased() : nil
    }
    if let revision = plain(given) { return revision }
    let git = "\(packageRoot)/.git"
    guard let head = try? String(contentsOfFile: "\(git)/HEAD", encoding: .utf8) else { return "unknown" }
    let trimmed = head.trimmingCharacters(in: .whitespacesAndNewlines)
    guard trimmed.hasPrefix("ref: ") else { return plain(trimmed) ?? "unknown" }
    let ref = String(trimmed.dropFirst(5))
    if let loose = try? String(contentsOfFile: "\(git)/\(ref)", encoding: .utf8), let revision = plain(loose) {
        return revision
    }
    let packed = (try? String(contentsOfFile: "\(git)/packed-refs", encoding: .utf8)) ?? ""
    for line in packed.split(separator: "\n") where line.hasSuffix(" \(ref)") {
        if let revision = plain(String(line.prefix(while: { $0 != " " }))) { return revision }
    }
    return "unknown"
}

let package = Package(
    name: "receipt-worker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "receipt-worker", targets: ["ReceiptWorkerCLI"]),
        .executable(name: "appstore-sim", targets: ["AppStoreSimulatorCLI"]),
        // For the benchmarks and the chaos driver, a package of their own (Benchmarks/).
        .library(name: "Kafka", targets: ["Kafka"]),
        .library(name: "Observability", targets: ["Observability"]),
        .library(name: "HTTPClient", targets: ["HTTPClient"]),
        .library(name: "AppleVerification", targets: ["AppleVerification"]),
        .library(name: "Crypto", targets: ["Crypto"]),
        .library(name: "AppStoreSimulator", targets: ["AppStoreSimulator"]),
        .library(name: "Ledger", targets: ["Ledger"]),
    ],
    targets: [
        // C libraries, through their C APIs. Each shim only includes the real header.
        .systemLibrary(
            name: "CRdKafka", pkgConfig: hasLocalRdkafka ? nil : "rdkafka",
            providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLinux"),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .target(name: "CBuildInfo", cSettings: [.define("RECEIPT_WORKER_REVISION", to: "\"\(sourceRevision())\"")]),

        // Library targets by concern.
        .target(name: "Vocabulary", swiftSettings: strict),
        .target(name: "Observability", dependencies: ["CLinux", "Vocabulary"], swiftSettings: strict),
        // Every OpenSSL call: hashes, random bytes, keys, certificates and their paths, JWS, PKCS#7, OCSP, AES-GCM.
        .target(name: "Crypto", dependencies: ["COpenSSL", "Vocabulary"], swiftSettings: strict),
        // What the flows send and receive: messages as values, and where they send them. No client, no C.
        .target(name: "Messaging", dependencies: ["Observability", "Vocabulary"], swiftSettings: strict),
        .target(
            name: "Kafka", dependencies: ["CRdKafka", "Messaging", "Observability", "Vocabulary"],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),

        // The ledger's domain: value types, the stores' protocols, the rules. No SQL, no C.
        .target(name: "LedgerDomain", dependencies: ["Vocabulary"], swiftSettings: strict),
        .target(
            name: "Ledger", dependencies: ["CSQLite", "CPostgres", "LedgerDomain", "Observability", "Vocabulary"],
            swiftSettings: strict),
        // A process's long-running parts as services of one group: started in order, stopped in reverse.
        .target(name: "Lifecycle", dependencies: ["Observability"], swiftSettings: strict),
        // The runtime every flow runs on (intake, slots, offsets, commits, drain, liveness): nothing of Apple.
        .target(
            name: "Runtime", dependencies: ["CLinux", "Kafka", "Lifecycle", "Messaging", "Observability", "Vocabulary"],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .target(name: "HTTPClient", dependencies: ["CCurl", "CLinux", "CZlib", "Observability"], swiftSettings: strict),
        .target(
            name: "AppleVerification", dependencies: ["Crypto", "HTTPClient", "Observability", "Vocabulary"],
            swiftSettings: strict),

        .target(name: "HTTPServerKit", dependencies: ["CLinux", "CMicroHTTPD", "Observability"], swiftSettings: strict),
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "AppleVerification", "CLinux", "Crypto", "HTTPClient", "HTTPServerKit", "Observability", "Vocabulary",
            ],
            swiftSettings: strict),

        // The worker's configuration: its keys, their defaults and checks, read from a file and the environment.
        .target(
            name: "Configuration",
            dependencies: [
                "AppleVerification", "Flows", "Kafka", "Ledger", "LedgerDomain", "Observability", "Runtime", "Vocabulary",
            ],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        // The events the worker publishes and their makers: stable ids, revenue, refund follow-ups.
        .target(
            name: "Events",
            dependencies: ["AppleVerification", "Crypto", "LedgerDomain", "Messaging", "Observability", "Vocabulary"],
            swiftSettings: strict),
        // The flows: the job, notification and consumption handlers and the chores, over Messaging, the ledger's
        // domain and Apple's verification. No Kafka, no SQL, no runtime: a flow is tested with in-memory stores.
        .target(
            name: "Flows",
            dependencies: [
                "AppleVerification", "Crypto", "Events", "LedgerDomain", "Lifecycle", "Messaging", "Observability",
                "Vocabulary",
            ],
            swiftSettings: strict),
        .target(
            name: "ReceiptWorker",
            dependencies: [
                "AppleVerification", "Configuration", "Events", "Flows", "HTTPServerKit", "Kafka", "Ledger",
                "LedgerDomain", "Lifecycle", "Messaging", "Observability", "Runtime", "Vocabulary", "Crypto",
                "DeskService", "Support", "HTTPClient", "CBuildInfo",
            ],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),

        // Support's lookup and credit, as the desk and the command line use them: over the worker's parts.
        .target(
            name: "Support",
            dependencies: [
                "AppleVerification", "Crypto", "Events", "Flows", "LedgerDomain", "Messaging", "Observability",
                "Vocabulary",
            ],
            swiftSettings: strict),

        // The support desk: its sign-in, sessions, rules of who may do what, audit, API and console.
        .target(
            name: "DeskService",
            dependencies: [
                "AppleVerification", "Crypto", "Events", "Flows", "HTTPClient", "HTTPServerKit", "LedgerDomain",
                "Lifecycle", "Messaging", "Observability", "Support", "Vocabulary",
            ],
            swiftSettings: strict),

        // Executables only wire the libraries together.
        .executableTarget(
            name: "ReceiptWorkerCLI",
            dependencies: [
                "DeskService", "ReceiptWorker", "HTTPServerKit", "Kafka", "Ledger", "LedgerDomain", "Lifecycle",
                "Observability", "Runtime", "Support", "Vocabulary",
            ],
            swiftSettings: strict + rdkafkaSwiftSettings,
            // jemalloc (Debian's libjemalloc2) serves the worker's malloc: a job's objects are made on one thread and
            // freed on another (the handlers', libcurl's, the ledger's), where glibc's per-thread caches run dry and
            // its slow paths took about a fifth of the worker's samples (docs/benchmarks.md, "The allocator").
            linkerSettings: rdkafkaLinkerSettings + [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]),
        .executableTarget(name: "AppStoreSimulatorCLI", dependencies: ["AppStoreSimulator"], swiftSettings: strict),

        // Tests. TestSupport holds helpers shared by test targets only; no product depends on it.
        .target(name: "TestProcess", path: "Tests/TestProcess"),
        .target(
            name: "TestSupport", dependencies: ["HTTPClient", "TestProcess"], path: "Tests/TestSupport",
            swiftSettings: strict),
        // librdkafka's mock cluster, for the tests that need a broker with faults: never linked into a product.
        .target(
            name: "KafkaMock", dependencies: ["CRdKafka"], path: "Tests/KafkaMock",
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .testTarget(
            name: "DeskServiceTests",
            dependencies: ["Events", "Flows", "Crypto", 
                "AppStoreSimulator", "AppleVerification", "DeskService", "HTTPServerKit", "Ledger", "ReceiptWorker",
                "Support", "TestSupport",
            ],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .testTarget(
            name: "KafkaTests", dependencies: ["Kafka", "Observability", "TestSupport"],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .testTarget(
            name: "AppleVerificationTests", dependencies: ["Crypto", "AppleVerification", "Vocabulary"],
            resources: [.copy("Fixtures")], swiftSettings: strict),
        .testTarget(
            name: "AppleClientTests",
            dependencies: ["Crypto", 
                "AppleVerification", "AppStoreSimulator", "HTTPClient", "HTTPServerKit", "Observability", "TestSupport",
                "Vocabulary",
            ],
            resources: [.copy("testSigningKey.p8")], swiftSettings: strict),
        .testTarget(
            name: "ReceiptWorkerTests",
            dependencies: ["Events", "Flows", "Crypto", 
                "ReceiptWorker", "AppleVerification", "HTTPClient", "HTTPServerKit", "Kafka", "Ledger", "Observability",
                "Runtime", "Support", "TestSupport", "Vocabulary",
            ],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .testTarget(
            name: "WorkerEndToEndTests",
            dependencies: ["Events", "Flows", "Crypto", 
                "ReceiptWorker", "AppStoreSimulator", "HTTPClient", "HTTPServerKit", "Kafka", "KafkaMock",
                "Observability", "Support", "TestSupport", "Vocabulary",
            ],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .testTarget(
            name: "LedgerTests", dependencies: ["Ledger", "CSQLite", "TestSupport", "Vocabulary"], swiftSettings: strict
        ),
        // What each fuzz target checks of one input: run by the libFuzzer executable (below) and replayed over
        // every seed, corpus entry and saved crash by FuzzReplayTests.
        .target(
            name: "FuzzChecks",
            dependencies: ["AppStoreSimulator", "Events", "Flows", 
                "ReceiptWorker", "AppleVerification", "Crypto", "DeskService", "HTTPServerKit", "Messaging",
                "Observability", "Vocabulary",
            ],
            path: "Fuzz/FuzzChecks", swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings
        ),
        .testTarget(
            name: "FuzzReplayTests", dependencies: ["FuzzChecks"], swiftSettings: strict + rdkafkaSwiftSettings,
            linkerSettings: rdkafkaLinkerSettings),
        .testTarget(
            name: "RuntimeTests",
            dependencies: ["Runtime", "Kafka", "KafkaMock", "Lifecycle", "Observability", "Vocabulary"],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .testTarget(
            name: "HTTPServerKitTests", dependencies: ["AppStoreSimulator", "HTTPServerKit", "TestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "KafkaIntegrationTests", dependencies: ["Kafka", "Observability", "TestSupport"],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
    ]
)

// The fuzzer (libFuzzer), only when RECEIPT_WORKER_FUZZ=1: the normal build and tests never see it. One executable
// runs every target (`FUZZ_TARGET` names it); scripts/fuzz.sh sets both and holds the build recipe.
if ProcessInfo.processInfo.environment["RECEIPT_WORKER_FUZZ"] == "1" {
    // libFuzzer's driver, declared (it comes with no header); `-sanitize=fuzzer` links the library itself.
    package.targets.append(.systemLibrary(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"))
    package.targets.append(
        .executableTarget(
            name: "Fuzzer", dependencies: ["CLibFuzzer", "FuzzChecks"], path: "Fuzz/Fuzzer",
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings))
    package.products.append(.executable(name: "Fuzzer", targets: ["Fuzzer"]))
}
