/// What this build is.
public enum BuildInfo {
    /// The release, bumped with each tagged release (`receipt-worker --version`).
    public static let version = "0.3.0"
}
