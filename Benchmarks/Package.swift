// swift-tools-version:6.2
import Foundation
import PackageDescription

// The benchmarks and the chaos driver, a package of their own: the product's build and tests never compile
// them. They use the product's libraries through its library products, with librdkafka found as the product
// finds it (scripts/setup.sh links it at ../.deps/librdkafka). Built by the bench and chaos scripts:
//   swift build -c release --package-path Benchmarks --product worker-bench
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path
let localRdkafka = "\(root)/.deps/librdkafka"
let hasLocalRdkafka = FileManager.default.fileExists(atPath: "\(localRdkafka)/include/librdkafka/rdkafka.h")
let rdkafkaSwiftSettings: [SwiftSetting] =
    hasLocalRdkafka ? [.unsafeFlags(["-Xcc", "-I\(localRdkafka)/include"])] : []
let rdkafkaLinkerSettings: [LinkerSetting] =
    hasLocalRdkafka
    ? [.unsafeFlags(["-L\(localRdkafka)/lib", "-Xlinker", "-rpath", "-Xlinker", "\(localRdkafka)/lib"])] : []
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

func product(_ name: String) -> Target.Dependency { .product(name: name, package: "receipt-worker") }

let package = Package(
    name: "receipt-worker-benchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "kafka-bench", targets: ["KafkaBench"]),
        .executable(name: "jws-bench", targets: ["JWSBench"]),
        .executable(name: "parse-bench", targets: ["ParseBench"]),
        .executable(name: "http-bench", targets: ["HTTPBench"]),
        .executable(name: "worker-bench", targets: ["WorkerBench"]),
        .executable(name: "notification-bench", targets: ["NotificationBench"]),
        .executable(name: "chaos-driver", targets: ["ChaosDriver"]),
        .executable(name: "ledger-bench", targets: ["LedgerBench"]),
        .executable(name: "span-bench", targets: ["SpanBench"]),
    ],
    dependencies: [.package(name: "receipt-worker", path: "..")],
    targets: [
        .executableTarget(
            name: "KafkaBench", dependencies: [product("Kafka"), product("Observability")],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .executableTarget(
            name: "WorkerBench", dependencies: [product("Kafka"), product("HTTPClient"), product("Observability")],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .executableTarget(
            name: "ChaosDriver", dependencies: [product("Kafka"), product("HTTPClient"), product("Observability")],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .executableTarget(
            name: "NotificationBench",
            dependencies: [
                product("AppStoreSimulator"), product("HTTPClient"), product("Kafka"), product("Observability"),
            ],
            swiftSettings: strict + rdkafkaSwiftSettings, linkerSettings: rdkafkaLinkerSettings),
        .executableTarget(
            name: "HTTPBench", dependencies: ["CEpoll", product("HTTPClient"), product("Observability")],
            swiftSettings: strict),
        .systemLibrary(name: "CEpoll"),
        .executableTarget(name: "LedgerBench", dependencies: [product("Ledger")], swiftSettings: strict),
        .executableTarget(
            name: "JWSBench", dependencies: [product("AppleVerification"), product("Crypto")], swiftSettings: strict),
        .executableTarget(name: "ParseBench", dependencies: [product("AppleVerification")], swiftSettings: strict),
        .executableTarget(
            name: "SpanBench", dependencies: [product("HTTPClient"), product("Observability")], swiftSettings: strict),
    ]
)
