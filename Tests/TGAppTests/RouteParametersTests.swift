import Testing

@testable import TGApp

/// A route's parameters: the first two pairs are kept inline, any more in a list; all read,
/// replace and remove alike, and two sets are equal whatever the order their pairs came in.
@Suite struct RouteParametersTests {
    @Test func pairsBeyondTheInlineOnesReadReplaceAndRemoveAlike() {
        var parameters = RouteParameters()
        #expect(parameters["a"] == nil)
        for (index, name) in ["a", "b", "c", "d"].enumerated() { parameters.add(name, "\(index)") }
        #expect(["a", "b", "c", "d"].map { parameters[$0] } == ["0", "1", "2", "3"])
        parameters["c"] = "two"
        parameters["a"] = nil
        parameters["e"] = "4"
        #expect(["a", "b", "c", "d", "e"].map { parameters[$0] } == [nil, "1", "two", "3", "4"])
        #expect(parameters == ["b": "1", "c": "two", "d": "3", "e": "4"])
        #expect(parameters != ["b": "1", "c": "two", "d": "3"])
        #expect(parameters != ["b": "1", "c": "2", "d": "3", "e": "4"])
    }

    @Test func equalSetsAreEqualWhateverTheOrderOfTheirPairs() {
        var forward = RouteParameters()
        forward.add("upstream", "graph")
        forward.add("rest", "v1/me")
        var backward = RouteParameters()
        backward.add("rest", "v1/me")
        backward.add("upstream", "graph")
        #expect(forward == backward)
        #expect(forward == ["upstream": "graph", "rest": "v1/me"])
        #expect(RouteParameters() == [:])
        #expect(forward != RouteParameters())
    }
}
