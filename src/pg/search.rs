//! SQL of full-text search that recall and the memory tool's search share.

/// The tsquery of the items that have any of the words `$wanted` and none
/// of the words `$unwanted` (see agent_memory_core::recall::Query), in
/// text search configuration `$config`. When no word is wanted (a query
/// of only stop words), it is the empty query, which matches nothing:
/// `!!` alone would match every item without the unwanted words.
macro_rules! matching {
    ($config:expr, $wanted:literal, $unwanted:literal) => {
        concat!(
            "CASE WHEN ",
            $unwanted,
            " OPERATOR(pg_catalog.=) '' OR pg_catalog.numnode(",
            $crate::pg::search::words_of!($config, $wanted),
            ") OPERATOR(pg_catalog.=) 0 THEN ",
            $crate::pg::search::words_of!($config, $wanted),
            " ELSE ",
            $crate::pg::search::words_of!($config, $wanted),
            " OPERATOR(pg_catalog.&&) (OPERATOR(pg_catalog.!!) ",
            $crate::pg::search::words_of!($config, $unwanted),
            ") END"
        )
    };
}
pub(crate) use matching;

/// The tsquery of the words of `$text` (a web search), in configuration
/// `$config`.
macro_rules! words_of {
    ($config:expr, $text:literal) => {
        concat!("pg_catalog.websearch_to_tsquery(", $config, ", ", $text, ")")
    };
}
pub(crate) use words_of;
