public import Lifecycle

/// The consumer runtime as a service: its graceful shutdown stops its intake, drains and commits.
public struct RuntimeService: Service {
    let runtime: ConsumerRuntime
    let topics: [String]
    let partitionCounts: [String: Int]

    public init(runtime: ConsumerRuntime, topics: [String], partitionCounts: [String: Int]) {
        self.runtime = runtime
        self.topics = topics
        self.partitionCounts = partitionCounts
    }

    public func run() async throws {
        try await withGracefulShutdown(of: [GracefulShutdown.current], stop: { runtime.shutdown() }) {
            try await runtime.run(subscribing: topics, partitionCounts: partitionCounts)
        }
    }
}
