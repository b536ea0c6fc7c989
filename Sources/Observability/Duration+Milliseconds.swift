extension Duration {
    /// Whole milliseconds, rounded down: what librdkafka and libcurl take for their timeouts.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// Seconds as a `Double`, fractions included: for gauges, logs and comparisons with numbers from outside.
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
