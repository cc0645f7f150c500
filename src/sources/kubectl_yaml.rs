//! kubectl's YAML List, cut into its items before parsing. serde_yaml holds
//! a whole document's events at once (a 115 MB `kubectl get pods -o yaml`
//! peaked at 1.8 GB); one item's are small. kubectl writes a List one way:
//!
//! ```yaml
//! apiVersion: v1
//! items:
//! - apiVersion: v1
//!   kind: Pod
//!   ...
//! kind: List
//! metadata:
//!   resourceVersion: ""
//! ```
//!
//! Anything else (several documents, an indented or flow `items`, a line the
//! layout does not allow) is not cut, and is parsed whole.

/// The items of a kubectl YAML List, each `- …` text with the line it starts
/// on (1-based); `None` when the text is not laid out as kubectl writes one.
pub fn list_items(text: &str) -> Option<Vec<(usize, &str)>> {
    let mut items = Vec::new();
    let mut is_list = false;
    // (line, byte offset) where the item being read began.
    let mut current: Option<(usize, usize)> = None;
    let mut in_items = false;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let number = i + 1;
        let bare = line.trim_end_matches(['\n', '\r']);
        let starts_item = bare.starts_with("- ") || bare == "-";
        let continues = bare.is_empty() || bare.starts_with(' ');
        if in_items && starts_item {
            if let Some((l, start)) = current.replace((number, offset)) {
                items.push((l, &text[start..offset]));
            }
        } else if in_items && continues {
            // The item's own lines (or blank lines in its block scalars).
            if current.is_none() && !bare.trim().is_empty() {
                return None;
            }
        } else {
            // A key at the top: the List's own fields.
            if let Some((l, start)) = current.take() {
                items.push((l, &text[start..offset]));
            }
            in_items = false;
            if bare == "items:" {
                if !items.is_empty() {
                    return None;
                }
                in_items = true;
            } else if bare.starts_with("kind: ") && bare.ends_with("List") {
                is_list = true;
            } else if !is_top_level_field(bare) {
                return None;
            }
        }
        offset += line.len();
    }
    if let Some((l, start)) = current {
        items.push((l, &text[start..]));
    }
    (is_list && !items.is_empty()).then_some(items)
}

/// A line kubectl writes at the top of a List: `apiVersion: v1`,
/// `metadata:`, `kind: List` — or the indented lines under `metadata:`
/// (`  resourceVersion: ""`). Plain words only: a quote, bracket or
/// block-scalar sign there could open a value that runs over the items
/// (`note: "` swallowing them), which only the whole parse reads right.
fn is_top_level_field(line: &str) -> bool {
    let field = line.trim_start();
    if field.is_empty() {
        return true;
    }
    let Some((key, value)) = field.split_once(':') else {
        return false;
    };
    let value = value.trim();
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '/' | '_');
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric()) && (value == "\"\"" || value.chars().all(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubectl_list_is_cut_at_its_items_and_anything_else_is_left_whole() {
        let list = "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: a\n  data: |\n    one\n\n    two\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: b\nkind: List\nmetadata:\n  resourceVersion: \"\"\n";
        let items = list_items(list).unwrap();
        assert_eq!(items.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [3, 11]);
        assert!(items[0].1.starts_with("- apiVersion") && items[0].1.ends_with("    two\n"), "{:?}", items[0].1);
        assert!(items[1].1.ends_with("    name: b\n"));
        for not_cut in [
            "kind: Pod\nmetadata:\n  name: a\n",
            "apiVersion: v1\nkind: List\nitems: []\n",
            "apiVersion: v1\nitems:\n  - kind: Pod\nkind: List\n",
            "items:\n- kind: Pod\n---\nitems:\n- kind: Pod\nkind: List\n",
            "apiVersion: v1\nitems:\n- kind: Pod\nkind: PodList\n\"odd\": line\n",
            "apiVersion: v1\nitems:\n- kind: Pod\n",
            // A List-level value that runs on over the items: only the whole parse reads it right.
            "apiVersion: v1\nmetadata:\n  note: \"\nitems:\n- kind: Pod\n  metadata:\n    name: ghost\nkind: List\nz: 1\"\n",
            "apiVersion: v1\nmetadata: {a: [\nitems:\n- kind: Pod\nkind: List\n",
            "apiVersion: v1\nmetadata:\n  note: |\nitems:\n- kind: Pod\nkind: List\n",
        ] {
            assert_eq!(list_items(not_cut), None, "{not_cut}");
        }
    }
}
