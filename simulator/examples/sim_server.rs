//! Runs a simulated cluster and cloud until Ctrl-C, printing the API URL, for manual use with
//! `kubectl --server`.
//!
//! `cargo run -p simulator --example sim_server`

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = simulator::Simulation::start(simulator::Config::default()).await?;
    println!("{}", sim.api_url());
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    Ok(())
}
