//! Themes: named roles mapped to styles. Built-ins ship in `themes/*.toml`;
//! a user file of the same name in `<config dir>/themes/` is laid over the
//! built-in. `NO_COLOR` selects `mono`. A broken file names the file and
//! line, and kgpu falls back to the default theme.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

pub use crate::view_model::style::Role;

/// A style as written in a theme file; every field optional.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StyleSpec {
    pub fg: Option<String>,
    pub bg: Option<String>,
    pub bold: Option<bool>,
    pub dim: Option<bool>,
    pub italic: Option<bool>,
    pub underline: Option<bool>,
    pub reversed: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThemeFile {
    #[serde(default)]
    pub roles: BTreeMap<String, StyleSpec>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    pub name: String,
    styles: Vec<Style>,
}

pub const BUILTIN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("high-contrast", include_str!("../../themes/high-contrast.toml")),
    ("mono", include_str!("../../themes/mono.toml")),
];

pub const DEFAULT: &str = "dark";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ThemeError {
    #[error(
        "unknown theme '{0}'; valid themes: dark, light, high-contrast, mono (or a file in the config dir's themes/)"
    )]
    Unknown(String),
    #[error("theme file {path}: line {line}: {message}")]
    Parse { path: String, line: usize, message: String },
    #[error("theme file {path}: {message}")]
    Invalid { path: String, message: String },
    #[error("theme file {path}: {message}")]
    Io { path: String, message: String },
}

fn parse_color(s: &str) -> Option<Color> {
    Color::from_str(s.trim()).ok()
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Parses a theme file's text; errors name `path` and the line.
pub fn parse_file(path: &str, text: &str) -> Result<ThemeFile, ThemeError> {
    let file: ThemeFile = toml::from_str(text).map_err(|e| ThemeError::Parse {
        path: path.to_string(),
        line: e.span().map_or(1, |s| line_of(text, s.start)),
        message: e.message().to_string(),
    })?;
    for (role, spec) in &file.roles {
        let line = text.find(&format!("{role} ")).or_else(|| text.find(role.as_str())).map_or(1, |o| line_of(text, o));
        if !Role::ALL.iter().any(|r| r.name() == role) {
            return Err(ThemeError::Parse { path: path.to_string(), line, message: format!("unknown role '{role}'") });
        }
        for colour in [&spec.fg, &spec.bg].into_iter().flatten() {
            if parse_color(colour).is_none() {
                return Err(ThemeError::Parse {
                    path: path.to_string(),
                    line,
                    message: format!("'{colour}' is not a colour (use a name, #rrggbb or 0-255)"),
                });
            }
        }
    }
    Ok(file)
}

fn apply(style: Style, spec: &StyleSpec, colours: bool) -> Style {
    let mut s = style;
    if colours {
        if let Some(c) = spec.fg.as_deref().and_then(parse_color) {
            s = s.fg(c);
        }
        if let Some(c) = spec.bg.as_deref().and_then(parse_color) {
            s = s.bg(c);
        }
    }
    for (flag, modifier) in [
        (spec.bold, Modifier::BOLD),
        (spec.dim, Modifier::DIM),
        (spec.italic, Modifier::ITALIC),
        (spec.underline, Modifier::UNDERLINED),
        (spec.reversed, Modifier::REVERSED),
    ] {
        match flag {
            Some(true) => s = s.add_modifier(modifier),
            Some(false) => s = s.remove_modifier(modifier),
            None => {}
        }
    }
    s
}

impl Theme {
    fn from_files(name: &str, files: &[&ThemeFile], colours: bool) -> Theme {
        let mut styles = vec![Style::default(); Role::ALL.len()];
        for file in files {
            for role in Role::ALL {
                if let Some(spec) = file.roles.get(role.name()) {
                    styles[role.index()] = apply(styles[role.index()], spec, colours);
                }
            }
        }
        Theme { name: name.to_string(), styles }
    }

    pub fn style(&self, role: Role) -> Style {
        self.styles.get(role.index()).copied().unwrap_or_default()
    }

    pub fn border(&self, focused: bool) -> Style {
        self.style(if focused { Role::BorderFocused } else { Role::Border })
    }

    /// A built-in theme; `dark` if the name is unknown.
    pub fn builtin(name: &str) -> Theme {
        let text = BUILTIN.iter().find(|(n, _)| *n == name).map_or(BUILTIN[0].1, |(_, t)| t);
        let file = parse_file(name, text).unwrap_or_default();
        Theme::from_files(name, &[&file], name != "mono")
    }

    /// Loads `name`: the built-in (if any) with the user's file of the same
    /// name laid over it. Never fails: problems come back as warnings and
    /// the default theme is used.
    pub fn load(name: &str, config_dir: Option<&Path>, no_color: bool) -> (Theme, Vec<String>) {
        let mut warnings = Vec::new();
        let wanted = if no_color { "mono" } else { name };
        let user_path: Option<PathBuf> = config_dir.map(|d| d.join("themes").join(format!("{wanted}.toml")));
        let builtin = BUILTIN.iter().find(|(n, _)| *n == wanted).map(|(_, t)| *t);
        let user = match &user_path {
            Some(p) if p.exists() => match std::fs::read_to_string(p) {
                Ok(text) => match parse_file(&p.display().to_string(), &text) {
                    Ok(f) => Some(f),
                    Err(e) => {
                        warnings.push(format!("{e}; using the {DEFAULT} theme"));
                        return (Theme::builtin(if no_color { "mono" } else { DEFAULT }), warnings);
                    }
                },
                Err(e) => {
                    warnings.push(format!(
                        "{}; using the {DEFAULT} theme",
                        ThemeError::Io { path: p.display().to_string(), message: e.to_string() }
                    ));
                    return (Theme::builtin(DEFAULT), warnings);
                }
            },
            _ => None,
        };
        let Some(base_text) = builtin.or(user.as_ref().map(|_| BUILTIN[0].1)) else {
            warnings.push(format!("{}; using the {DEFAULT} theme", ThemeError::Unknown(wanted.to_string())));
            return (Theme::builtin(DEFAULT), warnings);
        };
        let base = parse_file(wanted, base_text).unwrap_or_default();
        let mut files = vec![&base];
        if let Some(u) = &user {
            files.push(u);
        }
        (Theme::from_files(wanted, &files, !no_color && wanted != "mono"), warnings)
    }
}

impl Default for Theme {
    fn default() -> Self {
        Theme::builtin(DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_sets_every_role() {
        for (name, text) in BUILTIN {
            let file = parse_file(name, text).unwrap_or_else(|e| panic!("{e}"));
            for role in Role::ALL {
                assert!(file.roles.contains_key(role.name()), "{name} lacks role {}", role.name());
            }
        }
    }

    #[test]
    fn mono_has_no_colour() {
        let t = Theme::builtin("mono");
        for role in Role::ALL {
            assert_eq!(t.style(role).fg, None);
            assert_eq!(t.style(role).bg, None);
        }
        let (t, w) = Theme::load("dark", None, true);
        assert!(w.is_empty());
        assert_eq!(t.name, "mono", "NO_COLOR selects mono");
    }

    #[test]
    fn broken_file_names_file_and_line_and_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        std::fs::write(dir.path().join("themes/dark.toml"), "[roles]\ntext = { fg = \"white\" }\ngpu_free = { fg = \n")
            .unwrap();
        let (theme, warnings) = Theme::load("dark", Some(dir.path()), false);
        assert_eq!(theme, Theme::builtin("dark"));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("themes/dark.toml: line 3"), "{}", warnings[0]);
        assert!(warnings[0].contains("using the dark theme"));
    }

    #[test]
    fn unknown_role_and_bad_colour_are_reported_with_their_line() {
        let e = parse_file("t.toml", "[roles]\ntext = {}\nshiny = { fg = \"red\" }\n").unwrap_err();
        assert_eq!(e, ThemeError::Parse { path: "t.toml".into(), line: 3, message: "unknown role 'shiny'".into() });
        let e = parse_file("t.toml", "[roles]\n\ntext = { fg = \"blurple\" }\n").unwrap_err();
        assert!(matches!(e, ThemeError::Parse { line: 3, .. }), "{e:?}");
    }

    #[test]
    fn user_file_overrides_only_what_it_sets() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        std::fs::write(dir.path().join("themes/dark.toml"), "[roles]\ngpu_free = { fg = \"#00ff00\" }\n").unwrap();
        let (theme, warnings) = Theme::load("dark", Some(dir.path()), false);
        assert!(warnings.is_empty());
        assert_eq!(theme.style(Role::GpuFree).fg, Some(Color::Rgb(0, 255, 0)));
        assert_eq!(theme.style(Role::GpuUsed), Theme::builtin("dark").style(Role::GpuUsed));
    }

    #[test]
    fn unknown_theme_warns_and_uses_default() {
        let (theme, warnings) = Theme::load("neon", None, false);
        assert_eq!(theme.name, "dark");
        assert!(warnings[0].contains("unknown theme 'neon'"));
    }
}
