//! Runs a simulated cluster and cloud until Ctrl-C, printing the Kubernetes API URL and the AWS
//! endpoint (EC2, SSM, SQS), for manual use with `kubectl --server` and
//! `aws --endpoint-url` (any credentials work; signatures are not checked).
//!
//! `cargo run -p simulator --example sim_server`

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = simulator::Simulation::start(simulator::Config::default()).await?;
    println!("{}", sim.api_url());
    println!("AWS endpoint: {}", sim.aws_endpoint());
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    Ok(())
}
