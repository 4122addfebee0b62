//! The options several subcommands share: where the configuration comes from, and which
//! layout to use over the configured one.

use std::path::PathBuf;

use clap::Args;
use uidgen_core::Layout;

use crate::config::Config;

/// Options shared by commands that read the configuration.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// TOML configuration file; `UIDGEN_…` variables override it.
    #[arg(long, short = 'c', env = "UIDGEN_CONFIG")]
    pub config: Option<PathBuf>,
}

impl ConfigArgs {
    /// Read the configuration, for the command line to override keys before
    /// [`Config::settings`] checks them all.
    ///
    /// With `overridden` (the command line replaces some keys), the configuration is checked
    /// as read first: a broken file or variable is refused even where an argument replaces it,
    /// as it always was, since other commands on the host read it as it is.
    pub fn read(&self, overridden: bool) -> anyhow::Result<Config> {
        let path = self.config.as_deref();
        Ok(if overridden {
            Config::load(path)?
        } else {
            Config::read(path)?
        })
    }
}

/// Options that pick a layout, over the configured one.
#[derive(Debug, Clone, Args)]
pub struct LayoutArgs {
    /// Layout preset: baidu, baidu_legacy, baidu_continued, snowflake, leaf, vesta_max_peak,
    /// vesta_min_granularity, sonyflake, keyworker, safe_js.
    #[arg(long)]
    pub layout: Option<String>,
    /// Epoch for any preset but baidu_legacy, e.g. a Leaf twepoch (`2026-01-01`,
    /// `2026-01-01+08:00`, or milliseconds).
    #[arg(long)]
    pub epoch: Option<String>,
}

impl LayoutArgs {
    /// Apply the arguments to a configuration, before [`Config::settings`] checks it (a
    /// configured static worker id or worker range must fit the new layout too).
    pub fn apply(&self, config: &mut Config) {
        if let Some(preset) = &self.layout {
            config.layout.preset.clone_from(preset);
            if self.epoch.is_none() {
                config.layout.epoch = None;
            }
        }
        if let Some(epoch) = &self.epoch {
            config.layout.epoch = Some(epoch.clone());
        }
    }

    /// Whether an argument replaces a configured key.
    pub fn overrides(&self) -> bool {
        self.layout.is_some() || self.epoch.is_some()
    }

    /// The layout of the configuration `args` reads with the arguments applied, every key
    /// checked.
    pub fn layout(&self, args: &ConfigArgs) -> anyhow::Result<Layout> {
        Ok(self.settings(args)?.layout)
    }

    /// The settings of the configuration `args` reads with the arguments applied.
    pub fn settings(&self, args: &ConfigArgs) -> anyhow::Result<crate::config::Settings> {
        let mut config = args.read(self.overrides())?;
        self.apply(&mut config);
        Ok(config.settings()?)
    }
}
