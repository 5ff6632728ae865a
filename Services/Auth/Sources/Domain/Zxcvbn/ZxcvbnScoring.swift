import Foundation

/// zxcvbn's scoring: the least guessable way to cover the password with matches (dynamic
/// programming over match sequences), and the guesses → score thresholds.
package struct ZxcvbnScoring {
    package static let bruteforceCardinality = 10.0
    package static let minGuessesBeforeGrowingSequence = 10000.0
    package static let minSubmatchGuessesSingleChar = 10.0
    package static let minSubmatchGuessesMultiChar = 50.0
    package static let minYearSpace = 20
    package static let referenceYear = 2017

    package let data: ZxcvbnData

    package static func nCk(_ n: Int, _ k: Int) -> Double {
        if k > n { return 0 }
        if k == 0 { return 1 }
        var r = 1.0
        var n = Double(n)
        for d in 1...k {
            r *= n
            r /= Double(d)
            n -= 1
        }
        return r
    }

    package static func factorial(_ n: Int) -> Double { n <= 1 ? 1 : (2...n).reduce(1.0) { $0 * Double($1) } }

    /// An insertion-ordered map from sequence length to a value (Python dicts keep insertion order,
    /// and the reference's tie-breaking follows it).
    package struct Ordered<V> {
        package var keys: [Int] = []
        package var values: [Int: V] = [:]
        package subscript(l: Int) -> V? {
            get { values[l] }
            set {
                if values[l] == nil { keys.append(l) }
                values[l] = newValue
            }
        }
        package var items: [(Int, V)] { keys.map { ($0, values[$0]!) } }
    }

    package struct Result {
        package var guesses: Double
        package var sequence: [ZMatch]
    }

    package func mostGuessableMatchSequence(_ password: [Unicode.Scalar], _ matches: [ZMatch], excludeAdditive: Bool = false) -> Result {
        let n = password.count
        if n == 0 { return Result(guesses: 1, sequence: []) }
        var byJ = [[ZMatch]](repeating: [], count: n)
        for m in matches { byJ[m.j].append(m) }
        for k in 0..<n {
            byJ[k] = byJ[k].enumerated().sorted { ($0.element.i, $0.offset) < ($1.element.i, $1.offset) }.map(\.element)
        }
        var optM = [Ordered<ZMatch>](repeating: Ordered(), count: n)
        var optPi = [Ordered<Double>](repeating: Ordered(), count: n)
        var optG = [Ordered<Double>](repeating: Ordered(), count: n)

        func update(_ match: ZMatch, _ l: Int) {
            var m = match
            let k = m.j
            var pi = estimateGuesses(&m, password)
            if l > 1 { pi *= optPi[m.i - 1][l - 1]! }
            var g = Self.factorial(l) * pi
            if !excludeAdditive { g += pow(Self.minGuessesBeforeGrowingSequence, Double(l - 1)) }
            for (competingL, competingG) in optG[k].items {
                if competingL > l { continue }
                if competingG <= g { return }
            }
            optG[k][l] = g
            optM[k][l] = m
            optPi[k][l] = pi
        }

        func bruteforce(_ i: Int, _ j: Int) -> ZMatch {
            ZMatch(pattern: .bruteforce, i: i, j: j, token: Array(password[i...j]))
        }

        func bruteforceUpdate(_ k: Int) {
            update(bruteforce(0, k), 1)
            if k < 1 { return }
            for i in 1...k {
                let m = bruteforce(i, k)
                for (l, last) in optM[i - 1].items {
                    if last.pattern == .bruteforce { continue }
                    update(m, l + 1)
                }
            }
        }

        for k in 0..<n {
            for m in byJ[k] {
                if m.i > 0 {
                    for l in optM[m.i - 1].keys { update(m, l + 1) }
                } else {
                    update(m, 1)
                }
            }
            bruteforceUpdate(k)
        }

        // unwind
        var sequence: [ZMatch] = []
        var k = n - 1
        var bestL = 0
        var bestG = Double.infinity
        for (l, g) in optG[k].items where g < bestG {
            bestL = l
            bestG = g
        }
        var l = bestL
        while k >= 0 {
            let m = optM[k][l]!
            sequence.insert(m, at: 0)
            k = m.i - 1
            l -= 1
        }
        return Result(guesses: optG[n - 1][sequence.count]!, sequence: sequence)
    }

    package func estimateGuesses(_ m: inout ZMatch, _ password: [Unicode.Scalar]) -> Double {
        if let g = m.guesses, g != 0 { return g }
        var minGuesses = 1.0
        if m.token.count < password.count {
            minGuesses = m.token.count == 1 ? Self.minSubmatchGuessesSingleChar : Self.minSubmatchGuessesMultiChar
        }
        let guesses: Double
        switch m.pattern {
        case .bruteforce: guesses = bruteforceGuesses(m)
        case .dictionary: guesses = dictionaryGuesses(m)
        case .spatial: guesses = spatialGuesses(m)
        case .repeat: guesses = m.baseGuesses * m.repeatCount
        case .sequence: guesses = sequenceGuesses(m)
        case .regex: guesses = Double(max(abs(m.year - Self.referenceYear), Self.minYearSpace))
        case .date:
            var g = Double(max(abs(m.year - Self.referenceYear), Self.minYearSpace) * 365)
            if !m.separator.isEmpty { g *= 4 }
            guesses = g
        }
        m.guesses = max(guesses, minGuesses)
        return m.guesses!
    }

    package func bruteforceGuesses(_ m: ZMatch) -> Double {
        let guesses = pow(Self.bruteforceCardinality, Double(m.token.count))
        let minGuesses = m.token.count == 1 ? Self.minSubmatchGuessesSingleChar + 1 : Self.minSubmatchGuessesMultiChar + 1
        return max(guesses, minGuesses)
    }

    package func dictionaryGuesses(_ m: ZMatch) -> Double {
        Double(m.rank) * uppercaseVariations(m.token) * l33tVariations(m) * (m.reversed ? 2 : 1)
    }

    package func sequenceGuesses(_ m: ZMatch) -> Double {
        let first = m.token[0]
        var base: Double
        if ["a", "A", "z", "Z", "0", "1", "9"].contains(first) {
            base = 4
        } else if first.properties.numericType == .decimal {
            base = 10
        } else {
            base = 26
        }
        if !m.ascending { base *= 2 }
        return base * Double(m.token.count)
    }

    package func spatialGuesses(_ m: ZMatch) -> Double {
        let keyboard = m.graph == "qwerty" || m.graph == "dvorak"
        let s = Double(keyboard ? data.keyboardStartingPositions : data.keypadStartingPositions)
        let d = keyboard ? data.keyboardAverageDegree : data.keypadAverageDegree
        var guesses = 0.0
        let L = m.token.count
        let t = m.turns
        if L >= 2 {
            for i in 2...L {
                let possibleTurns = min(t, i - 1) + 1
                if possibleTurns > 1 {
                    for j in 1..<possibleTurns { guesses += Self.nCk(i - 1, j - 1) * s * pow(d, Double(j)) }
                }
            }
        }
        if m.shiftedCount != 0 {
            let S = m.shiftedCount
            let U = m.token.count - m.shiftedCount
            if S == 0 || U == 0 {
                guesses *= 2
            } else {
                var variations = 0.0
                for i in 1...min(S, U) { variations += Self.nCk(S + U, i) }
                guesses *= variations
            }
        }
        return guesses
    }

    package func uppercaseVariations(_ word: [Unicode.Scalar]) -> Double {
        let noASCIIUpper = word.allSatisfy { !$0.isASCIIUpper }
        if (!word.isEmpty && noASCIIUpper) || word.map(\.lowered) == word { return 1 }
        let noASCIILower = word.allSatisfy { !$0.isASCIILower }
        let startUpper = word.count >= 2 && word[0].isASCIIUpper && word.dropFirst().allSatisfy { !$0.isASCIIUpper }
        let endUpper = word.count >= 2 && word.last!.isASCIIUpper && word.dropLast().allSatisfy { !$0.isASCIIUpper }
        if startUpper || endUpper || (!word.isEmpty && noASCIILower) { return 2 }
        let U = word.filter(\.pyIsUpper).count
        let L = word.filter(\.pyIsLower).count
        var variations = 0.0
        if min(U, L) >= 1 { for i in 1...min(U, L) { variations += Self.nCk(U + L, i) } }
        return variations
    }

    package func l33tVariations(_ m: ZMatch) -> Double {
        if !m.l33t { return 1 }
        var variations = 1.0
        let chars = m.token.map(\.lowered)
        for (subbed, unsubbed) in m.sub {
            let S = chars.filter { $0 == subbed }.count
            let U = chars.filter { $0 == unsubbed }.count
            if S == 0 || U == 0 {
                variations *= 2
            } else {
                var possibilities = 0.0
                for i in 1...min(U, S) { possibilities += Self.nCk(U + S, i) }
                variations *= possibilities
            }
        }
        return variations
    }

    package static func score(guesses: Double) -> Int {
        let delta = 5.0
        if guesses < 1e3 + delta { return 0 }
        if guesses < 1e6 + delta { return 1 }
        if guesses < 1e8 + delta { return 2 }
        if guesses < 1e10 + delta { return 3 }
        return 4
    }
}

/// zxcvbn (Dropbox's password strength estimator), ported from the reference `zxcvbn` 4.5.0
/// package on PyPI; its agreement with that package is checked by a test.
public struct Zxcvbn: PasswordStrengthEstimator {
    package let data: ZxcvbnData

    package init(data: ZxcvbnData) { self.data = data }
    /// The reference refuses longer passwords (and bcrypt reads 72 bytes only).
    public static let maxLength = 72

    public struct Estimate: Sendable {
        public var guesses: Double
        public var score: Int
    }

    public func estimate(_ password: String, userInputs: [String] = []) -> Estimate {
        let p = Array(password.unicodeScalars)
        var dictionaries = data.rankedDictionaries
        var inputs: [String: Int] = [:]
        for (i, w) in userInputs.enumerated() { inputs[w.lowercased()] = i + 1 }
        dictionaries.append((name: "user_inputs", ranks: inputs))
        let matcher = ZxcvbnMatcher(data: data)
        let result = ZxcvbnScoring(data: data).mostGuessableMatchSequence(p, matcher.omnimatch(p, dictionaries: dictionaries))
        return Estimate(guesses: result.guesses, score: ZxcvbnScoring.score(guesses: result.guesses))
    }

    public func score(_ password: String, userInputs: [String]) -> Int {
        estimate(password, userInputs: userInputs).score
    }
}
