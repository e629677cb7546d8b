//! What the negotiator knows about words: which say the same thing, which name something more
//! specific than another, which are only part of a phrase, which mean two different things, and
//! which say where a person stands on an axis (junior or senior, pre-seed or growth, full-time or
//! temporary, on site or remote).
//!
//! This is the rules' small world knowledge of professional matching, written as data:
//!
//! - **Concepts** ([`CONCEPTS`]): each names one thing people ask for or offer, the words and
//!   phrases that say it (`bookkeeper`, `accountant`, `keep the books`), and the concepts it
//!   implies (`cto` implies `technical`). A need is met by evidence of the same concept or of one
//!   that implies it, never the other way round: a CTO is technical, but "technical" does not
//!   make someone a CTO. Without an embeddings provider, this is how paraphrases meet.
//! - **Phrases**: a concept's multi-word spellings (`machine learning`, `data science`) are read
//!   as one word, so "science outreach" is no evidence of data science.
//! - **Homonyms** ([`HOMONYMS`]): technical names that are also ordinary words (Rust the game,
//!   Java the coffee, Python the snake, Go the board game, Scala the opera house). Each has the
//!   words that show its other sense; a text that shows the other sense and nothing technical
//!   uses the word in that sense, and it is no evidence for a technical need.
//! - **Axes** ([`AXES`]): two opposite poles each (seniority, company stage, commitment, place of
//!   work). A need at one pole and a person at the other contradict each other.
//! - **Weak words** carry little signal on their own (`company`, `platform`, `build`) and weigh
//!   less in a need.

use super::text::{self, Reading, Word};
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

/// One concept: its name, the words and phrases that say it, and the concepts it implies.
pub type Concept = (&'static str, &'static [&'static str], &'static [&'static str]);

/// The concepts (see the module docs). A spelling may belong to several concepts.
// A table: one concept to a line, however long, so that it reads (and diffs) as one.
#[rustfmt::skip]
pub const CONCEPTS: &[Concept] = &[
    // People and roles.
    ("engineer", &["engineer", "developer", "programmer", "coder", "software engineer", "software developer", "swe", "dev", "hacker"], &["technical"]),
    ("technical", &["technical", "technologist", "techie"], &[]),
    ("cto", &["cto", "chief technology officer", "chief technical officer", "vp engineering", "vp of engineering", "head of engineering", "director of engineering", "engineering director", "engineering leadership"], &["technical", "leader", "senior"]),
    ("leader", &["leader", "leadership", "head", "director", "vp", "chief", "executive", "manager", "management"], &[]),
    ("senior", &["senior", "experienced", "seasoned", "veteran", "expert", "principal"], &[]),
    ("cofounder", &["cofounder", "co-founder", "co-found", "cofound", "founding partner", "founding team", "founding member"], &[]),
    ("founder", &["founder", "entrepreneur", "ceo", "chief executive", "solo founder"], &[]),
    ("investor", &["investor", "vc", "venture capitalist", "venture capital", "venture partner", "angel", "angel investor", "business angel", "general partner", "limited partner", "fund", "backer", "growth equity", "private equity", "family office", "capital", "cheque", "check size", "invest", "investing", "syndicate", "micro-vc"], &["funding"]),
    ("funding", &["funding", "round", "fundraise", "fundraising", "raise", "investment", "financing", "money", "grant", "capital raise", "capital campaign", "major gifts", "donor", "donors", "development director"], &[]),
    ("sponsor", &["sponsor", "sponsorship", "brand deal", "brand partnership"], &["funding"]),
    ("mentor", &["mentor", "mentorship", "mentoring", "coach", "coaching", "advisor", "adviser", "advise", "advisory", "guidance"], &[]),
    ("tutor", &["tutor", "tutoring", "teacher", "teach", "instructor", "educator", "lecturer", "trainer"], &[]),
    ("designer", &["designer", "design", "ui", "ui designer", "product designer", "visual designer", "graphic designer", "graphic design"], &[]),
    ("ux", &["ux", "user experience", "usability", "user research", "ux research", "interaction design", "ui/ux", "ux/ui"], &[]),
    ("researcher", &["researcher", "research"], &[]),
    ("accountant", &["accountant", "accounting", "bookkeeper", "bookkeeping", "keep the books", "cpa", "chartered accountant", "payroll", "vat", "tax return"], &[]),
    ("lawyer", &["lawyer", "attorney", "solicitor", "legal counsel", "barrister", "legal"], &[]),
    ("recruiter", &["recruiter", "headhunter", "talent acquisition", "talent partner", "staffing", "recruitment", "recruitment agency", "talent scout"], &[]),
    ("marketer", &["marketer", "marketing", "growth marketing", "digital marketing", "performance marketing"], &[]),
    ("sales", &["sales", "selling", "sell", "salesperson", "account executive", "business development", "bizdev", "go-to-market", "gtm", "revenue team", "revenue organization", "hiring reps", "sdr", "bdr", "sales rep", "salesman", "saleswoman"], &[]),
    ("product-manager", &["product manager", "pm", "product management", "product owner", "head of product", "product lead"], &[]),
    ("producer", &["producer", "production manager", "launch manager"], &[]),
    ("scientist", &["scientist"], &[]),
    ("data-science", &["data science", "data scientist"], &["data"]),
    ("ml", &["machine learning", "ml", "deep learning", "artificial intelligence", "ai", "ml engineering", "ml models", "predictive modelling", "predictive modeling", "predictive models", "xgboost", "gradient boosting", "gradient-boosted", "random forest", "neural network", "neural networks", "pytorch", "tensorflow", "scikit-learn", "llm", "llms"], &[]),
    ("recommender", &["recommender", "recommender system", "recommendation system", "recommendation engine", "recommendation systems"], &[]),
    ("data-engineering", &["data engineer", "data engineering", "data pipeline", "etl", "elt", "data warehouse", "data platform"], &["data", "engineer"]),
    ("data", &["data", "analytics"], &[]),
    ("cfo", &["cfo", "chief financial officer", "finance lead", "head of finance", "finance director", "fractional cfo", "vp finance"], &["finance", "leader", "senior"]),
    ("finance", &["finance", "financial planning", "financial modelling", "financial modeling", "budgeting", "forecasting", "fp&a"], &[]),
    ("coo", &["coo", "chief operating officer", "head of operations", "operations lead", "vp operations"], &["operations", "leader", "senior"]),
    ("operations", &["operations", "ops", "operational", "operations manager"], &[]),
    ("cmo", &["cmo", "chief marketing officer", "head of marketing", "vp marketing", "marketing lead"], &["marketer", "leader", "senior"]),
    ("growth", &["growth marketer", "growth hacker", "head of growth", "user acquisition", "growth marketing"], &["marketer"]),
    ("writer", &["writer", "writing", "copywriter", "copywriting", "content writer", "journalist", "editor", "technical writer"], &[]),
    ("illustrator", &["illustrator", "illustration"], &["designer"]),
    ("photographer", &["photographer", "photography"], &[]),
    ("video", &["videographer", "video production", "video editing", "filmmaker", "video editor"], &[]),
    ("translator", &["translator", "translation", "interpreter", "localization"], &[]),
    ("clinician", &["doctor", "physician", "clinician", "gp", "md", "nurse", "nurse practitioner", "surgeon", "cardiologist", "psychiatrist", "pediatrician", "paediatrician"], &["health"]),
    ("therapist", &["therapist", "psychologist", "counsellor", "counselor", "psychotherapist"], &["health"]),
    ("analyst", &["analyst", "data analyst", "business analyst"], &["data"]),
    ("qa", &["qa", "quality assurance", "tester", "test automation", "sdet"], &[]),
    ("community", &["community manager", "community management", "community building"], &[]),
    ("customer-success", &["customer success", "account management", "account manager", "customer support"], &[]),
    ("hr", &["hr", "human resources", "people operations", "people ops"], &[]),
    ("pr", &["pr", "public relations", "communications", "comms", "press relations"], &[]),
    ("brand", &["branding", "brand design", "brand identity", "brand strategy"], &[]),
    ("events", &["event planning", "event management", "events", "conference"], &[]),
    ("musician", &["musician", "composer", "songwriter", "music producer"], &["music"]),
    ("music", &["music", "audio"], &[]),
    // Software.
    ("mobile", &["mobile", "mobile development", "mobile developer", "app developer", "mobile app"], &[]),
    ("ios", &["ios", "swiftui", "iphone"], &["mobile"]),
    ("android", &["android", "kotlin"], &["mobile"]),
    ("react-native", &["react native", "react-native", "expo", "flutter"], &["mobile"]),
    ("frontend", &["frontend", "front-end", "front end", "web frontend"], &["web"]),
    ("backend", &["backend", "back-end", "back end", "server-side", "api development"], &[]),
    ("fullstack", &["full-stack", "fullstack", "full stack"], &["frontend", "backend"]),
    ("web", &["web", "website", "websites", "web development"], &[]),
    ("infrastructure", &["infrastructure", "devops", "sre", "site reliability", "platform engineering", "cloud infrastructure", "cluster"], &[]),
    ("kubernetes", &["kubernetes", "k8s", "eks", "gke", "aks"], &["infrastructure"]),
    ("cloud", &["cloud", "aws", "amazon web services", "azure", "gcp", "google cloud"], &[]),
    ("security", &["security", "cybersecurity", "cyber security", "infosec", "information security", "identity security", "appsec"], &[]),
    ("devtools", &["developer tools", "devtools", "dev tools", "developer tooling", "developer tool", "cli", "cli tooling", "sdk"], &["infra-software"]),
    ("infra-software", &["software infrastructure", "infrastructure software", "developer infrastructure"], &[]),
    ("saas", &["saas", "software as a service", "b2b software", "enterprise software", "subscription software"], &["software"]),
    ("software", &["software"], &[]),
    ("b2b", &["b2b", "business-to-business", "enterprise"], &[]),
    ("open-source", &["open source", "open-source", "oss"], &[]),
    // Sectors.
    ("fintech", &["fintech", "financial technology", "wealthtech", "insurtech", "financial services"], &[]),
    ("payments", &["payments", "payment", "remittance", "cross-border payments", "ledger", "settlement", "card issuing", "payment api"], &["fintech"]),
    ("banking", &["bank", "banking", "neobank", "retail banking", "challenger bank"], &["fintech"]),
    ("edtech", &["edtech", "education", "educational", "e-learning", "learning science", "learning company", "school", "k-12", "tutoring app"], &[]),
    ("health", &["health", "healthcare", "health tech", "healthtech", "digital health", "medical", "medicine", "clinical", "medtech", "hospital", "patient care"], &[]),
    ("wellness", &["wellness", "wellbeing", "well-being", "fitness", "mindfulness", "meditation", "sleep", "mental health"], &["health"]),
    ("climate", &["climate", "climate tech", "climate-tech", "cleantech", "clean energy", "carbon", "decarbonization", "sustainability", "sustainable", "renewable", "renewables", "energy transition", "net zero"], &[]),
    ("logistics", &["logistics", "delivery", "last-mile", "fleet", "routing", "route", "supply chain", "shipping", "freight", "warehousing"], &[]),
    ("food-business", &["restaurant", "cafe", "bakery", "bar", "hospitality", "food service", "catering", "food business", "food-business", "coffee shop"], &[]),
    ("marketplace", &["marketplace", "two-sided marketplace"], &[]),
    ("ecommerce", &["e-commerce", "ecommerce", "online shop", "online store", "online shops"], &[]),
    ("game", &["game", "gaming", "video game", "esports"], &[]),
    ("robotics", &["robotics", "robot", "automation"], &[]),
    ("hardware", &["hardware", "electronics", "embedded", "embedded c", "firmware", "pcb"], &[]),
    ("social-media", &["social media", "instagram", "tiktok", "content creation"], &[]),
    ("blockchain", &["blockchain", "web3", "crypto", "cryptocurrency", "defi", "smart contract", "solidity"], &[]),
    ("nonprofit", &["nonprofit", "non-profit", "ngo", "charity", "social enterprise"], &[]),
    ("construction", &["construction", "civil engineering", "renovation", "general contractor", "building site"], &[]),
    ("real-estate", &["real estate", "property", "proptech", "realtor", "estate agent"], &[]),
    ("retail", &["retail", "shop", "store", "boutique"], &[]),
    ("manufacturing", &["manufacturing", "factory", "production line", "industrial"], &[]),
    ("agriculture", &["agriculture", "agritech", "agtech", "farming", "farm", "farmer", "agronomy"], &[]),
    ("energy", &["energy", "solar", "wind power", "battery", "grid", "heat pump"], &["climate"]),
    ("insurance", &["insurance", "underwriting"], &[]),
    ("postgresql", &["postgresql", "postgres", "psql"], &[]),
    ("javascript", &["javascript", "js", "ecmascript"], &[]),
    ("typescript", &["typescript", "ts"], &["javascript"]),
    ("go-language", &["golang"], &[]),
    ("react", &["react", "reactjs"], &["frontend", "javascript"]),
    ("node", &["nodejs", "node"], &["backend", "javascript"]),
    // Company stage and kinds of work.
    ("startup", &["startup", "start-up", "young company", "scale-up", "scaleup"], &["company"]),
    ("company", &["company", "firm", "business", "organization", "employer"], &[]),
    ("early-stage", &["early-stage", "early stage", "seed-stage", "seed stage", "pre-seed", "preseed", "seed", "pre-launch", "idea stage", "idea", "first round", "first institutional", "first raise", "young", "pre-revenue", "pre-product", "mvp"], &[]),
    ("late-stage", &["growth-stage", "growth stage", "growth equity", "growth round", "series b", "series c", "series d", "later rounds", "late-stage", "late stage", "ipo"], &[]),
    ("series-a", &["series a", "series-a"], &[]),
    ("revenue", &["revenue", "arr", "mrr", "paying customers", "traction"], &["client"]),
    ("freelance", &["freelance", "freelancer", "freelancing", "contract", "contractor", "contracting", "independent consultant", "consultant", "consulting", "project-based", "gig", "self-employed"], &[]),
    ("part-time", &["part-time", "part time", "fractional", "hours a month", "hours a week", "hours per month", "hours per week", "side project", "day a week", "days a week", "evenings", "weekends"], &[]),
    ("full-time", &["full-time", "full time", "permanent"], &[]),
    ("remote", &["remote", "remote-first", "fully remote", "work from home", "wfh", "distributed team", "work from anywhere"], &[]),
    ("on-site", &["on-site", "onsite", "in-office", "in office", "in person", "in-person", "relocate", "relocation"], &[]),
    ("job", &["job", "role", "position", "opening", "vacancy", "employment", "hire", "hiring", "recruit", "recruiting", "project", "work", "placement", "opportunity", "income"], &[]),
    ("internship", &["internship", "intern", "summer internship", "trainee", "apprenticeship"], &["job"]),
    ("client", &["client", "customer", "buyer", "account"], &[]),
    ("student", &["student", "learner", "pupil", "undergraduate", "phd student", "graduate student"], &[]),
    ("from-scratch", &["scratch", "zero", "ground up", "first hire", "first rep", "first employee", "zero to one"], &[]),
    ("team", &["team", "organization", "org", "department", "staff"], &[]),
    ("portfolio-review", &["portfolio review", "portfolio reviews", "review my portfolio"], &[]),
];

/// A technical name that is also an ordinary word, and the words that show its other sense.
pub struct Homonym {
    /// The word, as written.
    pub word: &'static str,
    /// What the other sense is, for people ("the survival game").
    pub other_sense: &'static str,
    /// Words and phrases that show the other sense.
    pub markers: &'static [&'static str],
}

/// Technical names that are ordinary words too.
pub const HOMONYMS: &[Homonym] = &[
    Homonym {
        word: "rust",
        other_sense: "the video game",
        markers: &[
            "game",
            "gaming",
            "survival",
            "facepunch",
            "streamer",
            "twitch",
            "esports",
            "base-building",
            "corrosion",
            "paint",
            "metalwork",
        ],
    },
    Homonym {
        word: "java",
        other_sense: "the coffee",
        markers: &[
            "coffee",
            "bean",
            "roast",
            "roastery",
            "roasting",
            "espresso",
            "barista",
            "sumatra",
            "island",
            "indonesia",
        ],
    },
    Homonym {
        word: "python",
        other_sense: "the snake",
        markers: &[
            "snake",
            "reptile",
            "herpetologist",
            "herpetology",
            "zoo",
            "husbandry",
            "reticulated",
            "animal",
            "terrarium",
            "vivarium",
        ],
    },
    Homonym {
        word: "go",
        other_sense: "the board game",
        markers: &["baduk", "weiqi", "igo", "board game", "dan", "kyu", "tournament", "player", "game strategy"],
    },
    Homonym {
        word: "ruby",
        other_sense: "the gemstone",
        markers: &["gem", "gemstone", "jewel", "jewelry", "jewellery", "jeweller", "necklace"],
    },
    Homonym {
        word: "swift",
        other_sense: "the singer or the bird",
        markers: &["taylor", "concert", "swiftie", "pop", "bird", "birding", "ornithology"],
    },
    Homonym {
        word: "scala",
        other_sense: "the opera house",
        markers: &["opera", "teatro", "milan", "soprano", "tenor", "theatre", "theater", "aria", "orchestra", "ballet"],
    },
    Homonym {
        word: "kafka",
        other_sense: "the writer",
        markers: &["franz", "novel", "literature", "literary", "author", "metamorphosis", "prague", "fiction"],
    },
    Homonym {
        word: "elixir",
        other_sense: "a drink",
        markers: &["cocktail", "potion", "bartender", "mixology", "drink", "tonic"],
    },
    Homonym {
        word: "crystal",
        other_sense: "crystals",
        markers: &["healing", "gemstone", "quartz", "spiritual", "reiki"],
    },
    Homonym { word: "dart", other_sense: "darts", markers: &["darts", "pub", "bullseye", "league"] },
    Homonym {
        word: "flask",
        other_sense: "lab glassware",
        markers: &["lab", "laboratory", "chemistry", "glassware", "thermos"],
    },
    Homonym {
        word: "pandas",
        other_sense: "the animal",
        markers: &["bamboo", "zoo", "wildlife", "animal", "bear", "conservation"],
    },
    Homonym {
        word: "django",
        other_sense: "the film or the guitarist",
        markers: &["film", "movie", "tarantino", "western", "reinhardt", "guitar", "guitarist", "jazz"],
    },
    Homonym {
        word: "rails",
        other_sense: "railways",
        markers: &["railway", "railroad", "train", "track", "locomotive"],
    },
    Homonym {
        word: "docker",
        other_sense: "the docks",
        markers: &["dock", "harbour", "harbor", "longshoreman", "stevedore"],
    },
    Homonym { word: "puppet", other_sense: "puppetry", markers: &["puppetry", "marionette", "puppeteer", "theatre"] },
    Homonym {
        word: "chef",
        other_sense: "cooking",
        markers: &["cooking", "kitchen", "culinary", "cuisine", "menu", "pastry", "restaurant"],
    },
    Homonym {
        word: "shell",
        other_sense: "the oil company or seashells",
        markers: &["oil", "petroleum", "seashell", "beach", "gas station"],
    },
    Homonym {
        word: "oracle",
        other_sense: "prophecy",
        markers: &["tarot", "prophecy", "psychic", "fortune", "delphi"],
    },
    Homonym { word: "lisp", other_sense: "the speech sound", markers: &["speech", "stutter", "speech therapy"] },
    Homonym { word: "spark", other_sense: "a spark", markers: &["spark plug", "ignition", "fire", "electrician"] },
    Homonym {
        word: "airflow",
        other_sense: "air movement",
        markers: &[
            "ventilation",
            "hvac",
            "air-change",
            "air change",
            "ductwork",
            "damper",
            "dampers",
            "cleanroom",
            "air quality",
            "heating",
            "cooling",
        ],
    },
    Homonym {
        word: "terraform",
        other_sense: "earthworks",
        markers: &["landscaping", "grading", "earthworks", "excavation", "soil", "planet", "mars"],
    },
    Homonym {
        word: "hive",
        other_sense: "beekeeping",
        markers: &["bee", "bees", "beekeeper", "beekeeping", "honey", "apiary"],
    },
    Homonym {
        word: "helm",
        other_sense: "a ship's helm",
        markers: &["sailing", "boat", "yacht", "ship", "captain", "skipper", "maritime"],
    },
    Homonym { word: "mocha", other_sense: "the coffee", markers: &["coffee", "espresso", "barista", "cafe", "latte"] },
    Homonym {
        word: "selenium",
        other_sense: "the element",
        markers: &["mineral", "supplement", "nutrition", "chemistry", "element", "soil"],
    },
    Homonym {
        word: "tableau",
        other_sense: "a painting or a stage scene",
        markers: &["painting", "painter", "theatre", "theater", "stage", "gallery"],
    },
    Homonym { word: "snowflake", other_sense: "snow", markers: &["snow", "winter", "ski", "weather", "christmas"] },
    Homonym {
        word: "flutter",
        other_sense: "fluttering",
        markers: &["butterfly", "butterflies", "bird", "heart", "cardiology", "atrial"],
    },
    Homonym {
        word: "cypress",
        other_sense: "the tree",
        markers: &["tree", "trees", "forestry", "arborist", "garden", "landscaping"],
    },
];

/// Words that show a text speaks of software.
const TECH_CONTEXT: &[&str] = &[
    "software",
    "programming",
    "programmer",
    "developer",
    "engineer",
    "engineering",
    "code",
    "coding",
    "coder",
    "backend",
    "back-end",
    "frontend",
    "front-end",
    "full-stack",
    "api",
    "database",
    "sql",
    "postgresql",
    "mysql",
    "devops",
    "cloud",
    "aws",
    "kubernetes",
    "microservices",
    "algorithm",
    "machine learning",
    "data science",
    "data engineering",
    "data pipeline",
    "web",
    "github",
    "open source",
    "cli",
    "framework",
    "stack",
    "script",
    "scripting",
    "compiler",
    "library",
    "sdk",
    "saas",
    "golang",
    "typescript",
    "javascript",
    "linux",
    "docker",
    "terraform",
    "django",
    "react",
    "spring boot",
    "rust",
    "python",
    "java",
];

/// One axis on which a need and a person can stand at opposite poles.
pub struct Axis {
    /// What it measures, for people ("seniority").
    pub name: &'static str,
    /// The two poles: what each is called for people, and the words that show it.
    pub poles: [(&'static str, &'static [&'static str]); 2],
    /// Whether a need at the second pole also conflicts with a person at the first (seniority
    /// does not: someone senior can do what a junior is sought for).
    pub both_ways: bool,
}

/// The axes (see the module docs). The poles of company stage and order size are also read
/// from the own user's description, which says the stage they are at and the size they need.
pub const AXES: &[Axis] = &[
    Axis {
        name: "seniority",
        poles: [
            (
                "senior",
                &[
                    "senior",
                    "experienced",
                    "seasoned",
                    "veteran",
                    "expert",
                    "principal",
                    "head",
                    "director",
                    "vp",
                    "chief",
                    "cto",
                    "ceo",
                    "lead",
                    "leader",
                    "manager",
                    "founder",
                    "partner",
                    "owner",
                    "professor",
                    "lecturer",
                ],
            ),
            (
                "junior",
                &[
                    "junior",
                    "intern",
                    "internship",
                    "student",
                    "trainee",
                    "apprentice",
                    "graduating",
                    "graduate",
                    "entry-level",
                    "beginner",
                    "aspiring",
                    "second-year",
                    "first-year",
                    "undergraduate",
                    "switching careers",
                    "career switch",
                    "career change",
                ],
            ),
        ],
        both_ways: false,
    },
    Axis {
        name: "company stage",
        poles: [
            (
                "pre-seed or seed",
                &[
                    "pre-seed",
                    "preseed",
                    "seed-stage",
                    "seed stage",
                    "early-stage",
                    "early stage",
                    "pre-revenue",
                    "pre-product",
                    "pre-launch",
                    "idea stage",
                    "first round",
                    "first institutional",
                    "first raise",
                ],
            ),
            (
                "growth stage",
                &[
                    "growth-stage",
                    "growth stage",
                    "growth equity",
                    "growth-equity",
                    "growth round",
                    "series c",
                    "series d",
                    "series e",
                    "later rounds",
                    "late-stage",
                    "late stage",
                    "ipo",
                    "pre-ipo",
                ],
            ),
        ],
        both_ways: true,
    },
    Axis {
        name: "commitment",
        poles: [
            ("full-time", &["full-time", "full time", "permanent"]),
            (
                "temporary or part-time",
                &[
                    "part-time",
                    "part time",
                    "internship",
                    "summer",
                    "temporary",
                    "short-term",
                    "three-month",
                    "3-month",
                    "side income",
                    "side project",
                ],
            ),
        ],
        both_ways: true,
    },
    Axis {
        name: "order size",
        poles: [
            (
                "small batches",
                &[
                    "small batch",
                    "small batches",
                    "small-batch",
                    "prototype",
                    "prototypes",
                    "low minimums",
                    "low minimum",
                    "pilot run",
                ],
            ),
            ("high volume", &["high-volume", "high volume", "mass production", "bulk", "large volume", "large-volume"]),
        ],
        both_ways: true,
    },
    Axis {
        name: "place of work",
        poles: [
            (
                "on site",
                &["on-site", "onsite", "in-office", "in office", "in person", "in-person", "relocate", "relocation"],
            ),
            ("remote", &["remote", "remote-first", "fully remote", "work from home", "wfh"]),
        ],
        both_ways: true,
    },
];

/// Words that say little on their own; they weigh less in a need.
const WEAK: &[&str] = &[
    "app",
    "application",
    "area",
    "build",
    "business",
    "company",
    "day",
    "field",
    "firm",
    "help",
    "hour",
    "industry",
    "level",
    "month",
    "new",
    "paid",
    "people",
    "person",
    "platform",
    "product",
    "project",
    "scene",
    "sector",
    "service",
    "solution",
    "space",
    "startup",
    "team",
    "thing",
    "time",
    "tool",
    "week",
    "work",
    "world",
];

/// The index of the tables above, built once from their spellings.
struct Index {
    /// A word's key (or a phrase's joined keys) -> the concepts it says.
    by_key: HashMap<String, Vec<&'static str>>,
    /// Multi-word spellings, as the keys of their words, longest first.
    phrases: Vec<Vec<String>>,
    /// The phrases (indexes into `phrases`, longest first) by the key of their first word.
    phrase_starts: HashMap<String, Vec<usize>>,
    /// A concept -> every concept it implies, directly or not.
    implies: HashMap<&'static str, Vec<&'static str>>,
    /// Keys of the words that show software.
    tech: HashSet<String>,
    /// Keys of the weak words.
    weak: HashSet<String>,
}

/// The keys of a spelling's content words (without phrase merging).
fn spelling_keys(spelling: &str) -> Vec<String> {
    text::read(spelling).words.into_iter().map(|w| w.key).collect()
}

/// The key a merged phrase is known by.
fn phrase_key(keys: &[String]) -> String {
    keys.join("_")
}

static INDEX: LazyLock<Index> = LazyLock::new(|| {
    let mut by_key: HashMap<String, Vec<&'static str>> = HashMap::new();
    let mut phrases: Vec<Vec<String>> = Vec::new();
    let mut spellings: Vec<&str> = Vec::new();
    for (name, says, _) in CONCEPTS {
        for spelling in *says {
            let keys = spelling_keys(spelling);
            let key = match keys.len() {
                0 => continue,
                1 => keys[0].clone(),
                _ => {
                    if !phrases.contains(&keys) {
                        phrases.push(keys.clone());
                    }
                    phrase_key(&keys)
                }
            };
            let entry = by_key.entry(key).or_default();
            if !entry.contains(name) {
                entry.push(name);
            }
        }
    }
    // Phrases used by the other tables are read whole too.
    for h in HOMONYMS {
        spellings.extend(h.markers);
    }
    spellings.extend(TECH_CONTEXT);
    for axis in AXES {
        for (_, markers) in &axis.poles {
            spellings.extend(*markers);
        }
    }
    for spelling in spellings {
        let keys = spelling_keys(spelling);
        if keys.len() > 1 && !phrases.contains(&keys) {
            phrases.push(keys);
        }
    }
    phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let direct: HashMap<&'static str, &'static [&'static str]> =
        CONCEPTS.iter().map(|(name, _, implies)| (*name, *implies)).collect();
    let mut implies = HashMap::new();
    for (name, _, _) in CONCEPTS {
        let mut seen: Vec<&'static str> = Vec::new();
        let mut stack: Vec<&'static str> = direct[name].to_vec();
        while let Some(c) = stack.pop() {
            if !seen.contains(&c) {
                seen.push(c);
                stack.extend(direct.get(c).copied().unwrap_or_default());
            }
        }
        implies.insert(*name, seen);
    }
    let keys_of = |list: &[&str]| -> HashSet<String> { list.iter().map(|s| phrase_key(&spelling_keys(s))).collect() };
    let mut phrase_starts: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, p) in phrases.iter().enumerate() {
        phrase_starts.entry(p[0].clone()).or_default().push(i);
    }
    Index { by_key, phrases, phrase_starts, implies, tech: keys_of(TECH_CONTEXT), weak: keys_of(WEAK) }
});

/// Reads `raw` with the concepts' phrases merged into single words, and `go` kept only where
/// the text speaks of software (or is a short label, like a skill): elsewhere it is the verb.
pub fn read(raw: &str) -> Reading {
    remembered(raw, false)
}

/// Reads a description of someone (see [`text::read_description`]) like [`read`].
pub fn read_description(raw: &str) -> Reading {
    remembered(raw, true)
}

/// How many readings the process keeps: the same profiles and intents are read at every turn of
/// a negotiation, and reading (folding, stemming) is most of what a decision costs.
const REMEMBERED: usize = 8192;

/// Texts longer than this are read every time (a reading is kept only for short texts).
const REMEMBERED_LEN: usize = 2_000;

fn remembered(raw: &str, description: bool) -> Reading {
    // Keyed by the lexicon too: its phrases are merged into the reading.
    type Cache = std::sync::Mutex<lru::LruCache<(bool, usize, String), Reading>>;
    static CACHE: LazyLock<Cache> = LazyLock::new(|| {
        std::sync::Mutex::new(lru::LruCache::new(std::num::NonZeroUsize::new(REMEMBERED).expect("non-zero")))
    });
    if raw.len() > REMEMBERED_LEN {
        return finish(if description { text::read_description(raw) } else { text::read(raw) });
    }
    let key = (description, crate::lexicon::id(crate::lexicon::get()), raw.to_owned());
    if let Some(hit) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    let reading = finish(if description { text::read_description(raw) } else { text::read(raw) });
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).put(key, reading.clone());
    reading
}

fn finish(mut reading: Reading) -> Reading {
    merge_phrases(&mut reading.words);
    merge_lexicon_phrases(crate::lexicon::get(), &mut reading.words);
    if reading.words.iter().any(|w| w.key == "go") {
        let label = reading.words.len() <= 2;
        let tech = reading.words.iter().any(|w| w.key != "go" && is_tech(w));
        if !label && !tech {
            reading.words.retain(|w| w.key != "go");
        }
    }
    reading
}

fn merge_phrases(words: &mut Vec<Word>) {
    let index = &*INDEX;
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let found = index.phrase_starts.get(&words[i].key).and_then(|starts| {
            starts.iter().map(|&n| &index.phrases[n]).find(|p| {
                i + p.len() <= words.len() && words[i..i + p.len()].iter().zip(p.iter()).all(|(w, k)| &w.key == k)
            })
        });
        match found {
            Some(p) => {
                let run = &words[i..i + p.len()];
                out.push(Word {
                    key: phrase_key(p),
                    shown: run.iter().map(|w| w.shown.as_str()).collect::<Vec<_>>().join(" "),
                    parts: p.clone(),
                    negated: run.iter().any(|w| w.negated),
                    aspired: run.iter().any(|w| w.aspired),
                    exclusive: run.iter().any(|w| w.exclusive),
                    ..Word::default()
                });
                i += p.len();
            }
            None => {
                out.push(words[i].clone());
                i += 1;
            }
        }
    }
    *words = out;
}

/// Longest run of words read as one noun of the lexicon.
const LONGEST_LEXICON_PHRASE: usize = 3;

/// Merges runs of words that the lexicon knows as one noun (`physical therapist`, `truck
/// driver`, `tree surgeon`) into one word. Such a word is compared whole and by its senses, not
/// by its parts: a tree surgeon is no surgeon, and a truck driver is a driver because the
/// lexicon says so. Words the concept table already merged, negated words and compounds are
/// left alone.
fn merge_lexicon_phrases(lex: &crate::lexicon::Lexicon, words: &mut Vec<Word>) {
    if lex.is_empty() {
        return;
    }
    let plain = |w: &Word| w.parts.is_empty() && !w.negated;
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let mut merged = false;
        if plain(&words[i]) && lex.starts_phrase(&words[i].shown) {
            for len in (2..=LONGEST_LEXICON_PHRASE).rev() {
                let Some(run) = words.get(i..i + len) else { continue };
                if !run.iter().all(plain) || run.iter().any(|w| w.aspired != run[0].aspired) {
                    continue;
                }
                let shown: Vec<&str> = run.iter().map(|w| w.shown.as_str()).collect();
                if lex.is_noun_phrase(&shown) {
                    let keys: Vec<String> = run.iter().map(|w| w.key.clone()).collect();
                    out.push(Word {
                        key: phrase_key(&keys),
                        shown: shown.join(" "),
                        aspired: run[0].aspired,
                        exclusive: run.iter().any(|w| w.exclusive),
                        ..Word::default()
                    });
                    i += len;
                    merged = true;
                    break;
                }
            }
        }
        if !merged {
            out.push(words[i].clone());
            i += 1;
        }
    }
    *words = out;
}

/// The concepts a word says (not those they imply).
pub fn concepts_of(word: &Word) -> &'static [&'static str] {
    INDEX.by_key.get(&word.key).map(Vec::as_slice).unwrap_or_default()
}

/// The concepts a key says (a word's, or a compound's part's).
pub fn concepts_of_key(key: &str) -> &'static [&'static str] {
    INDEX.by_key.get(key).map(Vec::as_slice).unwrap_or_default()
}

/// The concepts `concept` implies, directly or not.
pub fn implied_by(concept: &str) -> &'static [&'static str] {
    INDEX.implies.get(concept).map(Vec::as_slice).unwrap_or_default()
}

/// Whether the word shows that its text speaks of software.
pub fn is_tech(word: &Word) -> bool {
    INDEX.tech.contains(&word.key)
}

/// Whether the word says little on its own.
pub fn is_weak(word: &Word) -> bool {
    INDEX.weak.contains(&word.key)
}

/// The key of a spelling as [`read`] would give it (a phrase's joined keys).
pub fn key_of(spelling: &str) -> String {
    let mut words = text::read(spelling).words;
    merge_phrases(&mut words);
    words.first().map(|w| w.key.clone()).unwrap_or_default()
}

/// The homonym a word is, if any.
pub fn homonym(word: &Word) -> Option<&'static Homonym> {
    static KEYS: LazyLock<Vec<(String, &'static Homonym)>> =
        LazyLock::new(|| HOMONYMS.iter().map(|h| (key_of(h.word), h)).collect());
    KEYS.iter().find(|(k, _)| *k == word.key).map(|(_, h)| *h)
}

/// The keys of a list of spellings (markers of a sense or of a pole).
pub fn keys_of(spellings: &[&str]) -> Vec<String> {
    spellings.iter().map(|s| key_of(s)).collect()
}

/// The keys of each homonym's markers, in the order of [`HOMONYMS`] (read once).
pub fn homonym_markers() -> &'static [Vec<String>] {
    static KEYS: LazyLock<Vec<Vec<String>>> = LazyLock::new(|| HOMONYMS.iter().map(|h| keys_of(h.markers)).collect());
    &KEYS
}

/// The keys of each axis's two poles, in the order of [`AXES`] (read once).
pub fn axis_poles() -> &'static [[Vec<String>; 2]] {
    static KEYS: LazyLock<Vec<[Vec<String>; 2]>> =
        LazyLock::new(|| AXES.iter().map(|a| [keys_of(a.poles[0].1), keys_of(a.poles[1].1)]).collect());
    &KEYS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(raw: &str) -> Vec<String> {
        read(raw).words.into_iter().map(|w| w.key).collect()
    }

    #[test]
    fn every_spelling_reads_as_something() {
        for (name, says, implies) in CONCEPTS {
            for s in *says {
                assert!(!key_of(s).is_empty(), "{name}: {s} reads as nothing");
            }
            for c in *implies {
                assert!(CONCEPTS.iter().any(|(n, _, _)| n == c), "{name} implies unknown {c}");
            }
        }
        for h in HOMONYMS {
            assert!(homonym(&text::Word::new(h.word, false)).is_some(), "{}", h.word);
        }
        let names: HashSet<&str> = CONCEPTS.iter().map(|c| c.0).collect();
        assert_eq!(names.len(), CONCEPTS.len(), "concept names are unique");
    }

    #[test]
    fn phrases_read_as_one_word() {
        assert_eq!(keys("a machine learning engineer"), [key_of("machine learning"), key_of("engineer")]);
        assert_eq!(keys("science outreach"), [key_of("science"), key_of("outreach")]);
        assert_ne!(keys("data science bootcamp")[0], key_of("science"));
        assert_eq!(keys("I keep the books for cafes").len(), 2);
    }

    #[test]
    fn go_is_the_language_only_where_software_is_near() {
        assert!(keys("Go and PostgreSQL every day").contains(&"go".to_owned()));
        assert!(keys("Go").contains(&"go".to_owned()));
        assert!(!keys("Happy to go deeper on the ledger work in a call").contains(&"go".to_owned()));
    }

    #[test]
    fn implication_is_transitive_and_one_way() {
        assert!(implied_by("cto").contains(&"technical"));
        assert!(implied_by("react-native").contains(&"mobile"));
        assert!(!implied_by("mobile").contains(&"react-native"));
        assert!(implied_by("devtools").contains(&"infra-software"));
    }
}
