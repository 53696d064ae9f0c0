//! A container's argv: `command` replaces the image entrypoint, `args` replace its cmd, and both
//! go through kubelet's `$(VAR)` expansion first.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Container;
use thiserror::Error;

use crate::image_map::ImageEntry;

/// kubelet's `expansion.Expand` (third_party/forked/golang/expansion): `$(NAME)` is replaced by
/// `mapping(NAME)`; an unknown name stays verbatim (`$(NAME)`), `$$` is an escaped `$`, and any
/// other `$` (shell syntax, an unterminated `$(`) is copied as is. The Go code works on bytes;
/// this works on chars, which only differs for a `$` followed by a multi-byte character, which
/// Go would mangle and this keeps intact.
pub fn expand(input: &str, mut mapping: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.chars().next() {
            // "$" at the very end is preserved
            None => {
                out.push('$');
                rest = after;
            }
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('(') => match after[1..].find(')') {
                Some(close) => {
                    let name = &after[1..1 + close];
                    match mapping(name) {
                        Some(value) => out.push_str(&value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[close + 2..];
                }
                // incomplete reference: emit "$(" and continue scanning after it
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            Some(c) => {
                out.push('$');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `MappingFuncFor` over an env list: the later of two equal names wins, as in kubelet's map.
pub fn env_mapping(env: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
    let map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    move |name| map.get(name).map(|v| (*v).to_owned())
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommandError {
    /// containerd's refusal when neither the pod nor the image names a program.
    #[error(
        "failed to generate container {container:?} spec: failed to generate spec: no command specified"
    )]
    NoCommand { container: String },
}

impl CommandError {
    /// The waiting reason kubelet shows for a container the runtime could not create.
    pub fn reason(&self) -> &'static str {
        "CreateContainerError"
    }
}

/// The argv the runtime executes. `env` is what kubelet generated for the container (service
/// links, `envFrom`, `env`), NOT the image env: kubelet expands `$(VAR)` before the runtime adds
/// image defaults, so `$(PATH)` stays verbatim unless the pod declares PATH.
///
/// Docker/OCI rules: with `command`, argv = command + args (the image cmd is dropped even when
/// `args` is empty); without it, argv = entrypoint + (args, or else the image cmd).
pub fn container_argv(
    container: &Container,
    image: Option<&ImageEntry>,
    env: &[(String, String)],
) -> Result<Vec<String>, CommandError> {
    let mapping = env_mapping(env);
    let command: Vec<String> = container
        .command
        .iter()
        .flatten()
        .map(|c| expand(c, &mapping))
        .collect();
    let args: Vec<String> = container
        .args
        .iter()
        .flatten()
        .map(|a| expand(a, &mapping))
        .collect();
    let mut argv = if !command.is_empty() {
        command
    } else {
        image.map(|i| i.entrypoint.clone()).unwrap_or_default()
    };
    if !args.is_empty() {
        argv.extend(args);
    } else if container.command.as_ref().is_none_or(Vec::is_empty) {
        argv.extend(image.map(|i| i.cmd.clone()).unwrap_or_default());
    }
    if argv.is_empty() {
        return Err(CommandError::NoCommand {
            container: container.name.clone(),
        });
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case of kubelet's `expand_test.go` `doExpansionTest`.
    #[test]
    fn kubelet_expansion_cases() {
        let vars = [
            ("VAR_A", "A"),
            ("VAR_B", "B"),
            ("VAR_C", "C"),
            ("VAR_REF", "$(VAR_A)"),
            ("VAR_EMPTY", ""),
        ];
        let env: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mapping = env_mapping(&env);
        let cases: &[(&str, &str, &str)] = &[
            ("whole string", "$(VAR_A)", "A"),
            ("repeat", "$(VAR_A)-$(VAR_A)", "A-A"),
            ("beginning", "$(VAR_A)-1", "A-1"),
            ("middle", "___$(VAR_B)___", "___B___"),
            ("end", "___$(VAR_C)", "___C"),
            ("compound", "$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
            ("escape & expand", "$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
            (
                "compound escape",
                "$$(VAR_A)_$$(VAR_B)",
                "$(VAR_A)_$(VAR_B)",
            ),
            ("mixed in escapes", "f000-$$VAR_A", "f000-$VAR_A"),
            ("backslash escape ignored", "foo\\$(VAR_C)bar", "foo\\Cbar"),
            (
                "backslash escape ignored 2",
                "foo\\\\$(VAR_C)bar",
                "foo\\\\Cbar",
            ),
            (
                "lots of backslashes",
                "foo\\\\\\\\$(VAR_A)bar",
                "foo\\\\\\\\Abar",
            ),
            (
                "nested var references",
                "$(VAR_A$(VAR_B))",
                "$(VAR_A$(VAR_B))",
            ),
            (
                "nested var references second type",
                "$(VAR_A$(VAR_B)",
                "$(VAR_A$(VAR_B)",
            ),
            ("value is a reference", "$(VAR_REF)", "$(VAR_A)"),
            (
                "value is a reference x 2",
                "%%$(VAR_REF)--$(VAR_REF)%%",
                "%%$(VAR_A)--$(VAR_A)%%",
            ),
            ("empty var", "foo$(VAR_EMPTY)bar", "foobar"),
            (
                "unterminated expression",
                "foo$(VAR_Awhoops!",
                "foo$(VAR_Awhoops!",
            ),
            (
                "expression without operator",
                "f00__(VAR_A)__",
                "f00__(VAR_A)__",
            ),
            ("shell special vars pass through", "$?_boo_$!", "$?_boo_$!"),
            ("bare operators are ignored", "$VAR_A", "$VAR_A"),
            (
                "undefined vars are passed through",
                "$(VAR_DNE)",
                "$(VAR_DNE)",
            ),
            (
                "multiple (even) operators, var undefined",
                "$$$$$$(BIG_MONEY)",
                "$$$(BIG_MONEY)",
            ),
            (
                "multiple (even) operators, var defined",
                "$$$$$$(VAR_A)",
                "$$$(VAR_A)",
            ),
            (
                "multiple (odd) operators, var undefined",
                "$$$$$$$(GOOD_ODDS)",
                "$$$$(GOOD_ODDS)",
            ),
            (
                "multiple (odd) operators, var defined",
                "$$$$$$$(VAR_A)",
                "$$$A",
            ),
            ("missing open expression", "$VAR_A)", "$VAR_A)"),
            ("shell syntax ignored", "${VAR_A}", "${VAR_A}"),
            (
                "trailing incomplete expression not consumed",
                "$(VAR_B)_______$(A",
                "B_______$(A",
            ),
            (
                "trailing incomplete expression, no content",
                "$(VAR_C)_______$(",
                "C_______$(",
            ),
            (
                "operator at end of input string is preserved",
                "$(VAR_A)foobarzab$",
                "Afoobarzab$",
            ),
            (
                "shell escaped incomplete expr",
                "foo-\\$(VAR_A",
                "foo-\\$(VAR_A",
            ),
            ("lots of $( in middle", "--$($($($($--", "--$($($($($--"),
            (
                "lots of $( in beginning",
                "$($($($($--foo$(",
                "$($($($($--foo$(",
            ),
            ("lots of $( at end", "foo0--$($($($(", "foo0--$($($($("),
            (
                "escaped operators in variable names are not escaped",
                "$(foo$$var)",
                "$(foo$$var)",
            ),
            ("newline not expanded", "\n", "\n"),
            ("multi-byte after operator", "$é$(VAR_A)", "$éA"),
        ];
        for (name, input, expected) in cases {
            assert_eq!(expand(input, &mapping), *expected, "{name}");
        }
    }

    fn container(command: Option<&[&str]>, args: Option<&[&str]>) -> Container {
        Container {
            name: "c".into(),
            command: command.map(|c| c.iter().map(|s| (*s).to_owned()).collect()),
            args: args.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            ..Default::default()
        }
    }

    fn image() -> ImageEntry {
        ImageEntry {
            entrypoint: vec!["/usr/local/bin/etcd".into()],
            cmd: vec!["--help".into()],
            ..Default::default()
        }
    }

    #[test]
    fn command_and_args_replace_entrypoint_and_cmd() {
        let env = vec![("NAME".to_owned(), "m0".to_owned())];
        let img = image();
        type Case<'a> = (Option<&'a [&'a str]>, Option<&'a [&'a str]>, &'a [&'a str]);
        let cases: &[Case] = &[
            (None, None, &["/usr/local/bin/etcd", "--help"]),
            (
                None,
                Some(&["--name=$(NAME)"]),
                &["/usr/local/bin/etcd", "--name=m0"],
            ),
            (Some(&["/bin/sh", "-c"]), None, &["/bin/sh", "-c"]),
            (
                Some(&["/bin/sh"]),
                Some(&["-c", "echo $(NAME) $$(NAME) $(PATH)"]),
                &["/bin/sh", "-c", "echo m0 $(NAME) $(PATH)"],
            ),
            (Some(&[]), Some(&["x"]), &["/usr/local/bin/etcd", "x"]),
            (Some(&[]), None, &["/usr/local/bin/etcd", "--help"]),
        ];
        for (command, args, expected) in cases {
            let argv = container_argv(&container(*command, *args), Some(&img), &env).unwrap();
            assert_eq!(argv, *expected, "command {command:?} args {args:?}");
        }
    }

    #[test]
    fn nothing_to_run_is_a_create_error() {
        let err = container_argv(&container(None, None), None, &[]).unwrap_err();
        assert_eq!(err.reason(), "CreateContainerError");
        assert_eq!(
            err.to_string(),
            "failed to generate container \"c\" spec: failed to generate spec: no command specified"
        );
        // args alone without an image entrypoint still run: argv[0] is the first arg
        assert_eq!(
            container_argv(&container(None, Some(&["/bin/true"])), None, &[]).unwrap(),
            ["/bin/true"]
        );
    }
}
