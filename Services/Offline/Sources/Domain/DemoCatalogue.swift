import Foundation

/// The geography quiz's demo content for the local stack: real countries, capitals, flags
/// (as emoji text) and capital coordinates, published through the same catalogue code as the
/// admin API.
package enum DemoCatalogue {
    package struct Country {
        package var code: String
        package var name: String
        package var capital: String
        package var flag: String
        package var continent: String
        package var lat: Double
        package var lon: Double
    }

    package static let countries: [Country] = [
        .init(code: "FR", name: "France", capital: "Paris", flag: "🇫🇷", continent: "europe", lat: 48.8566, lon: 2.3522),
        .init(code: "DE", name: "Germany", capital: "Berlin", flag: "🇩🇪", continent: "europe", lat: 52.52, lon: 13.405),
        .init(code: "IT", name: "Italy", capital: "Rome", flag: "🇮🇹", continent: "europe", lat: 41.9028, lon: 12.4964),
        .init(code: "ES", name: "Spain", capital: "Madrid", flag: "🇪🇸", continent: "europe", lat: 40.4168, lon: -3.7038),
        .init(code: "PT", name: "Portugal", capital: "Lisbon", flag: "🇵🇹", continent: "europe", lat: 38.7223, lon: -9.1393),
        .init(code: "GB", name: "United Kingdom", capital: "London", flag: "🇬🇧", continent: "europe", lat: 51.5072, lon: -0.1276),
        .init(code: "IE", name: "Ireland", capital: "Dublin", flag: "🇮🇪", continent: "europe", lat: 53.3498, lon: -6.2603),
        .init(code: "BE", name: "Belgium", capital: "Brussels", flag: "🇧🇪", continent: "europe", lat: 50.8503, lon: 4.3517),
        .init(code: "NL", name: "Netherlands", capital: "Amsterdam", flag: "🇳🇱", continent: "europe", lat: 52.3676, lon: 4.9041),
        .init(code: "CH", name: "Switzerland", capital: "Bern", flag: "🇨🇭", continent: "europe", lat: 46.948, lon: 7.4474),
        .init(code: "AT", name: "Austria", capital: "Vienna", flag: "🇦🇹", continent: "europe", lat: 48.2082, lon: 16.3738),
        .init(code: "PL", name: "Poland", capital: "Warsaw", flag: "🇵🇱", continent: "europe", lat: 52.2297, lon: 21.0122),
        .init(code: "CZ", name: "Czechia", capital: "Prague", flag: "🇨🇿", continent: "europe", lat: 50.0755, lon: 14.4378),
        .init(code: "HU", name: "Hungary", capital: "Budapest", flag: "🇭🇺", continent: "europe", lat: 47.4979, lon: 19.0402),
        .init(code: "GR", name: "Greece", capital: "Athens", flag: "🇬🇷", continent: "europe", lat: 37.9838, lon: 23.7275),
        .init(code: "SE", name: "Sweden", capital: "Stockholm", flag: "🇸🇪", continent: "europe", lat: 59.3293, lon: 18.0686),
        .init(code: "NO", name: "Norway", capital: "Oslo", flag: "🇳🇴", continent: "europe", lat: 59.9139, lon: 10.7522),
        .init(code: "FI", name: "Finland", capital: "Helsinki", flag: "🇫🇮", continent: "europe", lat: 60.1699, lon: 24.9384),
        .init(code: "DK", name: "Denmark", capital: "Copenhagen", flag: "🇩🇰", continent: "europe", lat: 55.6761, lon: 12.5683),
        .init(code: "RO", name: "Romania", capital: "Bucharest", flag: "🇷🇴", continent: "europe", lat: 44.4268, lon: 26.1025),
        .init(code: "JP", name: "Japan", capital: "Tokyo", flag: "🇯🇵", continent: "asia", lat: 35.6762, lon: 139.6503),
        .init(code: "CN", name: "China", capital: "Beijing", flag: "🇨🇳", continent: "asia", lat: 39.9042, lon: 116.4074),
        .init(code: "KR", name: "South Korea", capital: "Seoul", flag: "🇰🇷", continent: "asia", lat: 37.5665, lon: 126.978),
        .init(code: "IN", name: "India", capital: "New Delhi", flag: "🇮🇳", continent: "asia", lat: 28.6139, lon: 77.209),
        .init(code: "TH", name: "Thailand", capital: "Bangkok", flag: "🇹🇭", continent: "asia", lat: 13.7563, lon: 100.5018),
        .init(code: "VN", name: "Vietnam", capital: "Hanoi", flag: "🇻🇳", continent: "asia", lat: 21.0278, lon: 105.8342),
        .init(code: "ID", name: "Indonesia", capital: "Jakarta", flag: "🇮🇩", continent: "asia", lat: -6.2088, lon: 106.8456),
        .init(code: "PH", name: "Philippines", capital: "Manila", flag: "🇵🇭", continent: "asia", lat: 14.5995, lon: 120.9842),
        .init(code: "MY", name: "Malaysia", capital: "Kuala Lumpur", flag: "🇲🇾", continent: "asia", lat: 3.139, lon: 101.6869),
        .init(code: "SG", name: "Singapore", capital: "Singapore", flag: "🇸🇬", continent: "asia", lat: 1.3521, lon: 103.8198),
        .init(code: "PK", name: "Pakistan", capital: "Islamabad", flag: "🇵🇰", continent: "asia", lat: 33.6844, lon: 73.0479),
        .init(code: "NP", name: "Nepal", capital: "Kathmandu", flag: "🇳🇵", continent: "asia", lat: 27.7172, lon: 85.324),
        .init(code: "US", name: "United States", capital: "Washington, D.C.", flag: "🇺🇸", continent: "americas", lat: 38.9072, lon: -77.0369),
        .init(code: "CA", name: "Canada", capital: "Ottawa", flag: "🇨🇦", continent: "americas", lat: 45.4215, lon: -75.6972),
        .init(code: "MX", name: "Mexico", capital: "Mexico City", flag: "🇲🇽", continent: "americas", lat: 19.4326, lon: -99.1332),
        .init(code: "BR", name: "Brazil", capital: "Brasília", flag: "🇧🇷", continent: "americas", lat: -15.7939, lon: -47.8828),
        .init(code: "AR", name: "Argentina", capital: "Buenos Aires", flag: "🇦🇷", continent: "americas", lat: -34.6037, lon: -58.3816),
        .init(code: "PE", name: "Peru", capital: "Lima", flag: "🇵🇪", continent: "americas", lat: -12.0464, lon: -77.0428),
        .init(code: "CL", name: "Chile", capital: "Santiago", flag: "🇨🇱", continent: "americas", lat: -33.4489, lon: -70.6693),
        .init(code: "EG", name: "Egypt", capital: "Cairo", flag: "🇪🇬", continent: "africa", lat: 30.0444, lon: 31.2357),
        .init(code: "MA", name: "Morocco", capital: "Rabat", flag: "🇲🇦", continent: "africa", lat: 34.0209, lon: -6.8416),
        .init(code: "SN", name: "Senegal", capital: "Dakar", flag: "🇸🇳", continent: "africa", lat: 14.7167, lon: -17.4677),
        .init(code: "KE", name: "Kenya", capital: "Nairobi", flag: "🇰🇪", continent: "africa", lat: -1.2921, lon: 36.8219),
        .init(code: "ZA", name: "South Africa", capital: "Pretoria", flag: "🇿🇦", continent: "africa", lat: -25.7479, lon: 28.2293),
        .init(code: "NG", name: "Nigeria", capital: "Abuja", flag: "🇳🇬", continent: "africa", lat: 9.0765, lon: 7.3986),
        .init(code: "AU", name: "Australia", capital: "Canberra", flag: "🇦🇺", continent: "oceania", lat: -35.2809, lon: 149.13),
        .init(code: "NZ", name: "New Zealand", capital: "Wellington", flag: "🇳🇿", continent: "oceania", lat: -41.2865, lon: 174.7762),
    ]

    /// Category id → (name, items as (id, JSON object)).
    package static func categories() -> [(id: String, name: String, items: [(String, [String: Any])])] {
        func capitalQuestion(_ c: Country, _ pool: [Country]) -> [String: Any] {
            let others = pool.filter { $0.code != c.code }
            let choices =
                ([c.capital]
                + stride(from: 0, to: 3, by: 1).map {
                    others[(c.code.unicodeScalars.reduce(0) { $0 + Int($1.value) } + $0 * 7) % others.count].capital
                })
                .sorted()
            return [
                "type": "capital", "question": "What is the capital of \(c.name)?", "choices": choices,
                "answer": c.capital, "country_code": c.code, "latitude": c.lat, "longitude": c.lon,
            ]
        }
        func flagQuestion(_ c: Country) -> [String: Any] {
            ["type": "flag", "question": "Which country has this flag?", "flag": c.flag, "answer": c.name, "country_code": c.code]
        }
        let europe = countries.filter { $0.continent == "europe" }
        let asia = countries.filter { $0.continent == "asia" }
        return [
            ("capitals-europe", "Capitales d'Europe", europe.map { ("capital-\($0.code.lowercased())", capitalQuestion($0, europe)) }),
            ("capitals-world", "Capitales du monde", countries.map { ("capital-world-\($0.code.lowercased())", capitalQuestion($0, countries)) }),
            ("flags-europe", "Drapeaux d'Europe", europe.map { ("flag-\($0.code.lowercased())", flagQuestion($0)) }),
            ("flags-asia", "Drapeaux d'Asie", asia.map { ("flag-\($0.code.lowercased())", flagQuestion($0)) }),
        ]
    }
}
