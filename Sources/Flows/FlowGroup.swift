import AppleVerification

/// The runtime's groups of the flows beside each app's jobs (an app's own group is its name): the messages of a
/// group share its slots, so one group's waits never hold another's.
public enum FlowGroup {
    public static let notifications = "notifications"
    public static let consumption = "consumption"

    /// An app's consumption answers: each app's answers wait in slots of their own.
    package static func consumption(of app: AppleApp) -> String { "\(consumption):\(app.name)" }
}
