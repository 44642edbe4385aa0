//! Content blocks: what a prompt and an answer are made of.

use serde::{Deserialize, Serialize};

/// One block of message content.
///
/// Only text is read back from a child's answer; other kinds pass through
/// untouched and are dropped when an answer is rendered as text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 data.
        data: String,
        /// The MIME type, such as `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// The text of all text blocks, concatenated with nothing between them.
pub fn concat_text(blocks: &[ContentBlock]) -> String {
    blocks.iter().filter_map(ContentBlock::as_text).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concat_keeps_text_blocks_only_and_adds_no_separator() {
        let blocks = [
            ContentBlock::text("a"),
            ContentBlock::Image {
                data: String::new(),
                mime_type: "image/png".into(),
            },
            ContentBlock::text("b"),
        ];
        assert_eq!(concat_text(&blocks), "ab");
    }

    #[test]
    fn blocks_use_the_wire_shape() {
        let json = serde_json::to_string(&ContentBlock::text("hi")).unwrap();
        assert_eq!(json, r#"{"type":"text","text":"hi"}"#);
    }
}
