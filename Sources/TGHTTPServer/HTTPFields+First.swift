public import HTTPTypes

extension HTTPFields {
    /// The first field's value for `name`, if any. The subscript joins every field of that name
    /// into a new string; a single-valued field read on every request (`Authorization`,
    /// `X-Request-ID`) does not need that.
    public func first(_ name: HTTPField.Name) -> String? {
        for field in self where field.name == name { return field.value }
        return nil
    }
}
