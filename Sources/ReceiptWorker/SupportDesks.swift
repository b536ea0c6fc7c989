import AppleVerification
import Events
import Flows
public import LedgerDomain
public import Messaging
public import Observability
public import Support

// Support's desks from the worker's configuration: for `receipt-worker lookup` and `credit`, and the desk.

extension SupportDesk {
    /// The desk of one configured app (`app`: its name, `default` or an `apps.NAME`; nil: the default app), on
    /// `ledger`. Needs the app's App Store Server API key.
    public static func make(
        _ configuration: WorkerConfiguration, app name: String?, ledger: any SupportStore & DecisionStore & DeskStore,
        logger: Logger
    ) throws -> SupportDesk {
        let apps = try WorkerAssembly.appleApps(configuration, logger: logger)
        let wanted = name ?? "default"
        guard let index = apps.all.firstIndex(where: { $0.name == wanted || $0.bundleID == wanted }) else {
            throw ConfigurationError(
                .invalidValue, key: "--app",
                reason: "no configured app is named \(wanted) (default, or an apps.NAME, or a bundle id)")
        }
        let app = apps.all[index]
        guard let api = app.api else {
            throw ConfigurationError(
                .missingKey, key: index == 0 ? "apple.api.key_id" : "apps.\(app.name).api.key_id",
                reason: "support needs the App Store Server API key of app \(app.name)")
        }
        return SupportDesk(
            app: app, api: api, allowSandbox: configuration.allApps[index].allowSandbox, ledger: ledger,
            retry: configuration.retry)
    }

    /// The desks of every configured app that has an App Store Server API key (the support desk serves these),
    /// with each app's name and bundle id.
    public static func all(
        _ configuration: WorkerConfiguration, ledger: any SupportStore & DecisionStore & DeskStore, logger: Logger
    ) throws -> [(name: String, bundleID: String, desk: SupportDesk)] {
        let apps = try WorkerAssembly.appleApps(configuration, logger: logger)
        return apps.all.enumerated().compactMap { index, app in
            guard let api = app.api else { return nil }
            let desk = SupportDesk(
                app: app, api: api, allowSandbox: configuration.allApps[index].allowSandbox, ledger: ledger,
                retry: configuration.retry)
            return (app.name, app.bundleID, desk)
        }
    }

    /// The record that publishes a credit's event on `topics.results`, as the worker publishes its events.
    public static func message(_ event: StoredEvent, _ configuration: WorkerConfiguration) -> OutboundMessage {
        let record = event.record(topic: configuration.topics.results, source: configuration.eventSource)
        let trace = MessageHeader(name: "traceparent", string: TraceContext.fresh().traceparent)
        return OutboundMessage(
            topic: record.topic, key: Array(record.key.utf8), value: record.value, headers: record.headers + [trace])
    }
}
