import HTTPTypes

extension HTTPFields {
    /// Whether a field named `name` is present. Reading `fields[name]` to compare it with `nil`
    /// joins the values into a new string when there are any; the pipeline asks this on every
    /// hop (measured with the `pipeline` benchmark suite).
    func contains(_ name: HTTPField.Name) -> Bool {
        contains { $0.name == name }
    }
}
