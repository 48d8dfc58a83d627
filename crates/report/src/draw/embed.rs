//! What the self-contained interactive pages (`explore.html`, [`crate::draw::explore`];
//! `compare.html`, [`crate::draw::compare_page`]) share: their data embedded as JSON that cannot
//! end its `<script>` element, text escaped for HTML, attention weights stored in
//! thousandths to keep the files small, and the styles and script helpers both pages use
//! (`embed/page.css`, `embed/page.js`: error hooks, canvases, colour scale).

use serde::Serialize;

/// Styles both pages start from.
pub const PAGE_STYLE: &str = include_str!("embed/page.css");
/// Script both pages load before their own: defines `headlabPage`.
pub const PAGE_SCRIPT: &str = include_str!("embed/page.js");

/// `data` as JSON safe inside a `<script>` element: every `<` escaped as `\u003c` (valid
/// JSON, same string once parsed), so `</script>` or `<!--` in a token cannot end it.
pub fn script_json<T: Serialize>(data: &T) -> String {
    serde_json::to_string(data)
        .expect("page data serializes")
        .replace('<', "\\u003c")
}

/// `&`, `<`, `>` and `"` escaped for HTML text and attribute values.
pub fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An attention weight in thousandths (0..=1000): three decimals are more than a heatmap
/// or a line's opacity can show.
pub fn thousandths(p: f32) -> u16 {
    (p.clamp(0.0, 1.0) * 1000.0).round() as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_escapes_every_angle_bracket_and_parses_back() {
        let tokens = vec!["</script>", "<!--", "a&b"];
        let json = script_json(&tokens);
        assert!(!json.contains('<'), "{json}");
        let parsed: Vec<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed, tokens);
    }

    #[test]
    fn html_text_is_escaped() {
        assert_eq!(
            escape_html("<b a=\"1\">&</b>"),
            "&lt;b a=&quot;1&quot;&gt;&amp;&lt;/b&gt;"
        );
    }
}
