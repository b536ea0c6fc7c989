import DeskService
import Foundation
import HTTPClient
import HTTPServerKit
import Kafka
import Ledger
public import Lifecycle
public import Observability
import Support
import Synchronization

/// `receipt-worker desk`: the support desk as a process of its own (deploy/kubernetes/components/desk/desk.yaml), beside the
/// fleet. It holds the App Store Server API key, a ledger role with what support needs and a producer of the
/// results topic; agents hold none of them.
public enum DeskProcess {
    /// The desk's services: its metrics port first (when `metrics.listen` is set: `/startupz` says what it waits
    /// for), then the desk, once its ledger answers. The ledger is never migrated here (the worker or the
    /// migration Job does): a ledger without the desk's tables, or a role not granted them yet, is waited for.
    public static func group(_ configuration: WorkerConfiguration, logger: Logger) throws -> ServiceGroup {
        let settings = try configuration.desk.checkedForDesk()
        let desk = DeskAssembly(configuration: configuration, settings: settings, logger: logger)
        var services: [ServiceGroup.Entry] = []
        if let listen = configuration.metricsListen {
            let opening = "opening the ledger (waiting for it, or for its migration and grants)"
            let endpoint = try MetricsEndpoint(
                listen: listen, registry: desk.registry,
                readiness: { desk.server?.readiness ?? ["starting: \(opening)"] },
                starting: { desk.server == nil ? [opening] : [] })
            services.append(.init("metrics endpoint", endpoint))
        }
        services.append(.init("support desk", desk))
        return ServiceGroup(services, logger: logger)
    }
}

/// The desk, put together once its ledger answers.
final class DeskAssembly: Service {
    let registry = MetricsRegistry()
    let configuration: WorkerConfiguration
    let settings: WorkerConfiguration.Desk
    let logger: Logger
    private let made = Mutex<DeskServer?>(nil)

    init(configuration: WorkerConfiguration, settings: WorkerConfiguration.Desk, logger: Logger) {
        self.configuration = configuration
        self.settings = settings
        self.logger = logger
    }

    var server: DeskServer? { made.withLock { $0 } }

    func run() async throws {
        let shutdown = GracefulShutdown.current
        let configuration = self.configuration
        let bundleID = configuration.defaultApp.bundleID
        let opened: (any Ledger)? = try await withThrowingTaskGroup(of: (any Ledger)?.self) { group in
            group.addTask {
                try await LedgerFactory.open(
                    url: configuration.ledgerURL, poolSize: 4, schema: configuration.ledgerSchema,
                    defaultBundleID: bundleID.isEmpty ? nil : bundleID, migrate: false)
            }
            group.addTask {
                await shutdown.wait()
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let ledger = opened else { return }
        let server: DeskServer
        do {
            server = try DeskServer(
                configuration: configuration, settings: settings, ledger: ledger, registry: registry, logger: logger)
        } catch {
            await ledger.close()
            throw error
        }
        made.withLock { $0 = server }
        try await server.run()
    }
}

/// The desk's HTTP server and what it answers with.
final class DeskServer: Service {
    let registry: MetricsRegistry
    private let server: MicroHTTPServer
    private let desk: Desk
    private let producer: KafkaProducer
    private let ledger: any Ledger
    private let readyState = ReadyState()
    /// A readiness ping is in flight (one its deadline left behind may still wait for a connection).
    private let pinging = Atomic<Bool>(false)
    let logger: Logger

    init(
        configuration: WorkerConfiguration, settings: WorkerConfiguration.Desk, ledger: any Ledger,
        registry: MetricsRegistry, logger: Logger
    ) throws {
        self.registry = registry
        self.ledger = ledger
        self.logger = logger
        var http = HTTPClient.Configuration()
        http.caFile = settings.caFile
        http.maxResponseBytes = 1_048_576
        guard let deskSettings = settings.forDesk, let listen = settings.listen else {
            throw ConfigurationError(.missingKey, key: "desk.*", reason: "the desk's keys are incomplete")
        }
        // An agent waits for the answer: a broker that does not take a credit's event in 20 s fails it (503; the
        // same credit again publishes the same event).
        producer = try WorkerAssembly.producerForPeople(configuration, patienceMilliseconds: 20_000, logger: logger)
        let apps = try SupportDesk.all(configuration, ledger: ledger, logger: logger).map {
            DeskActions.App(name: $0.name, bundleID: $0.bundleID, desk: $0.desk)
        }
        guard !apps.isEmpty else {
            throw ConfigurationError(
                .missingKey, key: "apple.api.key_id", reason: "the desk needs an app with an App Store Server API key")
        }
        let producer = self.producer
        guard
            let desk = Desk(
                settings: deskSettings, apps: apps, store: ledger,
                publish: { try await producer.send(SupportDesk.message($0, configuration)) },
                finishTransactions: configuration.apple.finishTransactions,
                erasure: configuration.erasureKey.map { DeskActions.Erasure(store: ledger, key: $0) },
                http: HTTPClient(configuration: http, logger: logger), registry: registry, logger: logger)
        else {
            throw ConfigurationError(.invalidValue, key: "desk.session_key_file", reason: "must hold 32 bytes")
        }
        self.desk = desk
        // A public port's, with bodies of 64 KiB (512 connections at most: the desk answers people, not a crowd).
        let limits = HTTPServerLimits.publicPort(maximumBodyBytes: 64 * 1_024, descriptors: DescriptorBudget.current)
        do {
            server = try MicroHTTPServer(host: listen.host, port: listen.port, limits: limits) { request in
                await desk.handle(request)
            }
        } catch {
            throw ConfigurationError(.unusable, key: "desk.listen", reason: "cannot listen on \(listen): \(error)")
        }
        logger.info("support desk listening", ["listen": listen.description, "port": String(server.port)])
    }

    var port: UInt16 { server.port }

    /// Ready once the provider's keys were fetched and while the ledger answers.
    var readiness: [String] { readyState.problems }

    func run() async throws {
        server.start()
        let shutdown = GracefulShutdown.current
        while !shutdown.isTriggered && !Task.isCancelled {
            var problems: [String] = []
            if await !desk.refreshKeys() {
                problems.append("the sign-in provider's keys are not fetched yet")
            }
            do {
                // With a deadline: a ping queued behind a pool every request holds (a flood, a hung server) would
                // otherwise hold this loop, and the desk would stay ready at its last answer.
                // One at a time: a ping its deadline left behind still waits, and a new one would queue behind it.
                guard !pinging.exchange(true, ordering: .acquiring) else {
                    throw LedgerError(.unavailable, "the last ping has not been answered")
                }
                try await withDeadline(.seconds(5), timeout: LedgerError(.unavailable, "no answer within 5000 ms")) {
                    [self] in
                    defer { pinging.store(false, ordering: .releasing) }
                    try await ledger.ping()
                }
            } catch {
                problems.append("the ledger does not answer")
            }
            readyState.set(problems)
            await shutdown.sleep(for: .seconds(5))
        }
        readyState.set(["stopping"])
        // Requests being answered finish first (a credit between the ledger and the broker), 15 s at most.
        let patience = ContinuousClock.now + .seconds(15)
        while desk.requestsInFlight > 0 && ContinuousClock.now < patience {
            try? await Task.sleep(for: .milliseconds(50))
        }
        server.stop()
        await producer.close(timeout: .seconds(10))
        await ledger.close()
    }
}

extension WorkerConfiguration.Desk {
    /// What the desk takes of its keys; nil while one it needs is missing.
    var forDesk: Desk.Settings? {
        guard let publicURL, let issuer, let clientID, let clientSecret, let sessionKey else { return nil }
        return Desk.Settings(
            publicURL: publicURL, issuer: issuer, clientID: clientID, clientSecret: clientSecret, audience: audience,
            scopes: scopes,
            claims: DeskClaims(
                nameClaim: nameClaim, rolesClaim: rolesClaim, viewer: viewerRole, agent: agentRole, lead: leadRole),
            clockSkew: clockSkew, keysMaxAge: keysMaxAge, authorizedParties: authorizedParties, sessionKey: sessionKey,
            sessionMaxAge: sessionMaxAge, sessionIdle: sessionIdle,
            caps: CreditCaps(agentDaily: agentDailyCap, playerDaily: playerDailyCap))
    }
}

/// What `/readyz` says of the desk, updated every few seconds.
final class ReadyState: Sendable {
    private let state = Mutex<[String]>(["starting"])
    var problems: [String] { state.withLock { $0 } }
    func set(_ problems: [String]) { state.withLock { $0 = problems } }
}
