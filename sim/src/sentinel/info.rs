//! `sentinelRefreshInstanceInfo`: what a master's or replica's `INFO` says, and what
//! Sentinel does about it (a promotion confirmed, a returning old master converted, a
//! replica repointed, a reconfiguration moving on).

use super::{Addr, Failover, INFO_PERIOD, PUBLISH_PERIOD, Role, Sentinel};

/// The fields of an `INFO` reply Sentinel reads.
#[derive(Debug, Default)]
struct Report {
    runid: Option<String>,
    role: Option<Role>,
    /// `slaveN:ip=…,port=…` lines (read from a master only).
    replicas: Vec<Addr>,
    master: Option<Addr>,
    link_up: bool,
    link_down_ms: u64,
    priority: Option<u64>,
    offset: Option<u64>,
}

fn parse(info: &str, from_master: bool) -> Report {
    let mut r = Report::default();
    let (mut host, mut port) = (None, None);
    for line in info.split("\r\n") {
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        match field {
            "run_id" if value.len() >= 40 => r.runid = Some(value[..40].to_string()),
            "role" if value == "master" => r.role = Some(Role::Master),
            "role" if value == "slave" => r.role = Some(Role::Replica),
            "master_host" => host = Some(value.to_string()),
            "master_port" => port = value.parse::<u16>().ok(),
            "master_link_status" => r.link_up = value == "up",
            "master_link_down_since_seconds" => {
                r.link_down_ms = value.parse::<i64>().unwrap_or(0).max(0) as u64 * 1000;
            }
            "slave_priority" => r.priority = value.parse().ok(),
            "slave_repl_offset" => r.offset = value.parse().ok(),
            _ if from_master
                && field.len() > 5
                && field.starts_with("slave")
                && field[5..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                let (mut ip, mut p) = (None, None);
                for f in value.split(',') {
                    if let Some(v) = f.strip_prefix("ip=") {
                        ip = Some(v.to_string());
                    } else if let Some(v) = f.strip_prefix("port=") {
                        p = v.parse::<u16>().ok();
                    }
                }
                if let (Some(ip), Some(p)) = (ip, p) {
                    r.replicas.push(Addr::new(ip, p));
                }
            }
            _ => {}
        }
    }
    if let (Some(h), Some(p)) = (host, port) {
        r.master = Some(Addr::new(h, p));
    }
    r
}

impl Sentinel {
    /// `sentinelRefreshInstanceInfo`.
    pub(super) fn refresh_info(&mut self, from: &Addr, info: &str, now: u64) {
        let is_master = *from == self.master.addr;
        let report = parse(info, is_master);
        for addr in report.replicas {
            if addr != self.master.addr && !self.replicas.contains_key(&addr) {
                self.add_replica(addr, now);
            }
        }
        let describe = self.describe(from);
        let role = report.role.unwrap_or(Role::Unknown);
        let Some(inst) = self.instance_at(from) else {
            return;
        };
        inst.master_link_down_ms = report.link_down_ms;
        let rebooted = match (&inst.runid, &report.runid) {
            (Some(old), Some(new)) => old != new,
            _ => false,
        };
        if report.runid.is_some() {
            inst.runid = report.runid;
        }
        if role == Role::Replica {
            if report.master.is_some() {
                inst.slave_master = report.master;
            }
            inst.slave_link_up = report.link_up;
            inst.priority = report.priority.unwrap_or(inst.priority);
            inst.repl_offset = report.offset.unwrap_or(inst.repl_offset);
        }
        inst.info_refresh = now;
        if role != inst.role_reported {
            inst.role_reported_ms = now;
            inst.role_reported = role;
            if role == Role::Replica {
                inst.slave_conf_change_ms = now;
            }
        }
        if rebooted {
            self.event(now, "+reboot", describe.clone());
        }
        // Nothing acts in TILT, and a master reporting the replica role only goes
        // SDOWN in time.
        if self.tilt_since.is_some() || is_master {
            return;
        }
        let master = self.master.addr.clone();
        let sane = self.master_looks_sane(now);
        let inst = &self.replicas[from];
        let reason = match role {
            Role::Master if inst.promoted && self.failover == Failover::WaitPromotion => {
                self.promotion_confirmed(&describe, now);
                None
            }
            Role::Master => {
                // An instance we list as a replica says master (the old master back):
                // convert it, after waiting for newer configurations.
                let wait = PUBLISH_PERIOD * 4;
                (!inst.promoted
                    && sane
                    && inst.no_down_for(now, wait)
                    && now.saturating_sub(inst.role_reported_ms) > wait)
                    .then_some("+convert-to-slave")
            }
            Role::Replica => {
                let timeout = self.cfg.failover_timeout_ms;
                let misconfigured = inst.slave_master.as_ref() != Some(&master)
                    && sane
                    && inst.no_down_for(now, timeout)
                    && now.saturating_sub(inst.slave_conf_change_ms) > timeout;
                self.reconf_progress(from, &describe, now);
                misconfigured.then_some("+fix-slave-config")
            }
            Role::Unknown => None,
        };
        if let Some(why) = reason {
            let action = self.slaveof(from, Some(&master));
            self.outbox.push(action);
            self.event(now, why, describe);
        }
    }

    /// The promoted replica reports master: the master's config epoch becomes the
    /// failover's, and the other replicas are reconfigured.
    fn promotion_confirmed(&mut self, describe: &str, now: u64) {
        self.config_epoch = self.failover_epoch;
        self.failover = Failover::ReconfSlaves;
        self.failover_state_change_ms = now;
        self.event(now, "+promoted-slave", describe.to_string());
        let master = self.describe(&self.master.addr.clone());
        self.event(now, "+failover-state-reconf-slaves", master);
        // `sentinelForceHelloUpdateForMaster`.
        for peer in self.peers.values_mut() {
            peer.last_pub_ms = 0;
        }
    }

    /// A replica being reconfigured moved on: `RECONF_SENT` → `RECONF_INPROG` once it
    /// follows the promoted replica, → `RECONF_DONE` once its link is up.
    fn reconf_progress(&mut self, from: &Addr, describe: &str, now: u64) {
        let promoted = self.promoted.clone();
        let Some(inst) = self.replicas.get_mut(from) else {
            return;
        };
        let mut events = Vec::new();
        if inst.reconf_sent.is_some() && promoted.is_some() && inst.slave_master == promoted {
            inst.reconf_sent = None;
            inst.reconf_inprog = true;
            events.push("+slave-reconf-inprog");
        }
        if inst.reconf_inprog && inst.slave_link_up {
            inst.reconf_inprog = false;
            inst.reconf_done = true;
            events.push("+slave-reconf-done");
        }
        for kind in events {
            self.event(now, kind, describe.to_string());
        }
    }

    /// `sentinelMasterLooksSane`.
    fn master_looks_sane(&self, now: u64) -> bool {
        self.master.sdown_since.is_none()
            && self.odown_since.is_none()
            && self.master.role_reported == Role::Master
            && now.saturating_sub(self.master.info_refresh) < INFO_PERIOD * 2
    }
}
